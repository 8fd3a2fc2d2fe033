"""The realistic shape set matches the paper: Table 4's models in, Table 1's counts and ranges out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fixbits import shapes
from fixbits.matrices import MatrixError

# Paper Table 1: layer group -> (count, M range, N range, K range). Transcribed here on purpose,
# independently of matrices/shapes/models.yaml, so the test checks the data rather than echoing it.
TABLE1 = {
    "attention": (45, (256, 16_384), (2_048, 18_432), (2_048, 16_384)),
    "mlp_up": (21, (256, 16_384), (6_144, 33_792), (2_048, 7_168)),
    "mlp_down": (21, (256, 16_384), (2_048, 7_168), (6_144, 33_792)),
    "moe_up": (55, (16, 3_072), (512, 3_072), (2_048, 8_192)),
    "moe_down": (57, (16, 6_144), (2_048, 8_192), (512, 3_072)),
    "lm_head": (54, (1, 256), (100_352, 248_320), (2_048, 8_192)),
    "lora_b": (137, (80, 16_384), (768, 32_768), (8, 64)),
}
TABLE1_ALL = (390, (1, 16_384), (512, 248_320), (8, 33_792))

# Paper Table 4: model -> (hidden, FFN, expert, experts, active, vocab); None is the table's dash.
TABLE4 = {
    "Qwen3.8-2.4T-A95B": (8192, None, 2048, 512, 10, 248_320),
    "DeepSeek-V4-Pro": (7168, None, 3072, 384, 6, 129_280),
    "DeepSeek-V4-Flash": (4096, None, 2048, 256, 6, 129_280),
    "GLM-5.2": (6144, 12288, 2048, 256, 8, 154_880),
    "GLM-4.7-Flash": (2048, 10240, 1536, 64, 4, 154_880),
    "Kimi-K2.6": (7168, 18432, 2048, 384, 8, 163_840),
    "Kimi-K3": (7168, 33792, 3072, 896, 16, 163_840),
    "gpt-oss-120b": (2880, None, 2880, 128, 4, 201_088),
    "gpt-oss-20b": (2880, None, 2880, 32, 4, 201_088),
    "Nemotron-3.5-L": (2688, 1856, 1856, 128, 6, 131_072),
    "MiniMax-M2": (3072, None, 1536, 256, 8, 200_064),
    "Qwen3-30B-A3B": (2048, 6144, 768, 128, 8, 151_936),
    "Ling-3.0-flash": (2560, 6144, 768, 512, 8, 157_184),
    "Qwen3.6-35B-A3B": (2048, None, 512, 256, 8, 248_320),
    "Qwen3.8-27B": (5120, 17408, None, None, None, 248_320),
    "granite-4.1-8b": (4096, 12800, None, None, None, 100_352),
}


@pytest.fixture(scope="module")
def realistic() -> list[shapes.Shape]:
    return shapes.realistic_shapes()


def span(values: list[int]) -> tuple[int, int]:
    return (min(values), max(values))


def test_models_yaml_is_table4() -> None:
    spec = shapes.load_spec()
    got = {m.name: (m.hidden, m.ffn, m.expert, m.experts, m.active, m.vocab) for m in spec.models}
    assert got == TABLE4


@pytest.mark.parametrize("group", list(TABLE1))
def test_group_count_and_ranges_match_table1(realistic: list[shapes.Shape], group: str) -> None:
    rows = [s for s in realistic if s.layer == group]
    count, m, n, k = TABLE1[group]
    assert len(rows) == count
    assert span([s.m for s in rows]) == m
    assert span([s.n for s in rows]) == n
    assert span([s.k for s in rows]) == k


def test_whole_set_matches_table1(realistic: list[shapes.Shape]) -> None:
    count, m, n, k = TABLE1_ALL
    assert len(realistic) == count
    assert (
        span([s.m for s in realistic]),
        span([s.n for s in realistic]),
        span([s.k for s in realistic]),
    ) == (m, n, k)
    assert len({(s.layer, s.mnk) for s in realistic}) == count  # no duplicate within a group


def test_committed_file_is_what_the_generator_makes(realistic: list[shapes.Shape]) -> None:
    assert shapes.generate_realistic() == realistic
    assert shapes.dump_realistic(realistic) == shapes.REALISTIC_FILE.read_text()


def test_every_shape_reads_its_widths_from_its_model(realistic: list[shapes.Shape]) -> None:
    models = {m.name: m for m in shapes.load_spec().models}
    for s in realistic:
        model = models[s.model]
        if s.layer == "lm_head":
            assert (s.n, s.k) == (model.vocab, model.hidden), s
        elif s.layer in ("mlp_up", "moe_up"):
            assert s.k == model.hidden and s.n == (model.ffn if s.layer == "mlp_up" else model.expert), s
        elif s.layer in ("mlp_down", "moe_down"):
            assert s.n == model.hidden and s.k == (model.ffn if s.layer == "mlp_down" else model.expert), s
        elif s.layer == "lora_b":
            assert s.k in (8, 16, 32, 64) and s.n in (
                model.hidden,
                model.ffn,
                model.expert,
                model.mla_kv_b,
            ), s
        else:
            assert s.layer == "attention" and model.hidden in (s.n, s.k), s


def test_epilogues_follow_the_layer(realistic: list[shapes.Shape]) -> None:
    by_layer: dict[str, set[str]] = {}
    for s in realistic:
        by_layer.setdefault(s.layer, set()).add(s.epilogue)
        assert s.epilogue in shapes.EPILOGUES and s.model and s.projection
    assert by_layer["attention"] == {"none", "residual"}
    assert by_layer["mlp_down"] == {"residual"}
    assert by_layer["moe_down"] == {"scale"}
    assert by_layer["lora_b"] == {"scale+residual"}
    assert by_layer["mlp_up"] <= {"silu_gate", "gelu", "relu"} and by_layer["moe_up"] <= {
        "silu_gate",
        "gelu",
        "relu",
    }
    assert by_layer["lm_head"] == {"none", "scale"}
    assert {s.epilogue for s in realistic if s.model == "granite-4.1-8b" and s.layer == "lm_head"} == {
        "scale"
    }
    assert shapes.Shape(1, 2, 3, epilogue="scale+residual").epilogue_ops == ("scale", "residual")


def test_quick_mode_keeps_three_per_group() -> None:
    quick = shapes.realistic_shapes("quick")
    assert len(quick) == 3 * len(TABLE1)
    assert {s.layer for s in quick} == set(TABLE1)
    only = shapes.realistic_shapes(layers=["lm_head"])
    assert len(only) == 54
    with pytest.raises(ValueError, match="unknown layer group"):
        shapes.realistic_shapes(layers=["mlp"])
    with pytest.raises(ValueError, match="one of quick, full"):
        shapes.realistic_shapes("fast")


def test_too_few_candidates_is_an_error_naming_the_group(tmp_path: Path) -> None:
    spec = shapes.load_spec()
    small = dataclasses.replace(
        spec,
        groups=tuple(
            dataclasses.replace(g, tokens=g.tokens[:1]) if g.name == "mlp_up" else g for g in spec.groups
        ),
    )
    with pytest.raises(MatrixError, match="group mlp_up: the rules give only 8 shapes, Table 1 needs 21"):
        shapes.generate_realistic(small)


def test_models_yaml_errors_name_the_key(tmp_path: Path) -> None:
    text = shapes.MODELS_FILE.read_text().replace("activation: relu}", "activation: swish}", 1)
    bad = tmp_path / "models.yaml"
    bad.write_text(text)
    with pytest.raises(
        MatrixError, match=r"key 'models\[9\]\.activation': 'swish' is not one of silu_gate, gelu, relu"
    ):
        shapes.load_spec(bad)
    bad.write_text(
        shapes.MODELS_FILE.read_text().replace(
            "projections: {up: [ffn, hidden]}", "projections: {up: [ffn, width]}"
        )
    )
    with pytest.raises(
        MatrixError, match=r"key 'groups\.mlp_up\.projections\.up\[1\]': 'width' is not one of"
    ):
        shapes.load_spec(bad)


def test_realistic_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "realistic.yaml"
    bad.write_text("count: 1\nshapes:\n  - {m: 1, n: 2, k: 3, layer: mlp, epilogue: none}\n")
    with pytest.raises(MatrixError, match=r"key 'shapes\[0\]\.layer': 'mlp' is not one of attention"):
        shapes.load_realistic(bad)
    bad.write_text("count: 2\nshapes:\n  - {m: 1, n: 2, k: 3, layer: mlp_up, epilogue: none}\n")
    with pytest.raises(MatrixError, match="key 'count': says 2 but the file lists 1"):
        shapes.load_realistic(bad)
