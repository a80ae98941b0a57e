"""The video path: catalog arithmetic against published totals, SGLang Diffusion rules, the DiT step model (each
searched dimension moves the prediction), the emitted argv against the engine's parser table, and the CLI."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from autotune.catalog import load_preset
from autotune.cli import run
from autotune.engines.flags import validate_argv
from autotune.specs import MiTuneError
from autotune.video.catalog import VIDEO_CATALOG, expert_steps, load_video_model
from autotune.video.emit import build_launch, server_argv
from autotune.video.perf import video_cost
from autotune.video.plan import VideoPlan
from autotune.video.rules import ENGINE, VERSION, violations
from autotune.video.search import engine_default, evaluate, search
from autotune.video.workload import VideoWorkload, check

PRO = load_preset("rtx-pro-6000-x8")
H200 = load_preset("h200-x8")
WAN22 = load_video_model("wan2.2-t2v-a14b")
WORK = VideoWorkload().resolved(WAN22)  # 720p, 81 frames, 40 steps, guidance 4


@pytest.mark.parametrize(
    ("name", "per_expert_tol", "total_tol"),
    [
        ("wan2.1-t2v-14b", 0.03, 0.03),
        # the card's "27B total" is two 14B-class experts rounded down; the config arithmetic gives 2 x 14.29B
        ("wan2.2-t2v-a14b", 0.03, 0.07),
        ("hunyuanvideo", 0.03, 0.03),
    ],
)
def test_parameter_counts_match_published_totals(name, per_expert_tol, total_tol):
    m = load_video_model(name)
    assert abs(m.dit_params / m.published_dit_params - 1) < per_expert_tol
    assert abs(m.total_params / m.published_total_params - 1) < total_tol


def test_text_encoder_and_token_arithmetic():
    te = WAN22.text_encoder
    assert abs(te.params / te.published_params - 1) < 0.02  # UMT5-XXL encoder, 11.4 GB in bf16
    assert WORK.latent_tokens(WAN22) == 21 * 45 * 80  # (81-1)/4+1 latent frames x 720/16 x 1280/16
    assert load_video_model("Wan-AI/Wan2.1-T2V-14B-Diffusers").name == "wan2.1-t2v-14b"
    assert set(VIDEO_CATALOG) >= {"wan2.2-t2v-a14b", "wan2.1-t2v-14b", "hunyuanvideo"}


def test_wan22_experts_split_the_steps_at_the_boundary():
    high, low = expert_steps(WAN22, 40)
    assert high + low == 40 and high > low > 0  # shift 12 keeps sigma >= 0.875 for the first 26 steps
    assert expert_steps(load_video_model("wan2.1-t2v-14b"), 50) == (50,)


def _broken(plan, hw=PRO, model=WAN22, work=WORK):
    return [str(v) for v in violations(plan, model, work, hw)]


def test_rules_ring_needs_a_ring_capable_backend_and_sage_on_sm120():
    assert any("ring-capable" in v for v in _broken(VideoPlan(ring=4, attention="torch_sdpa")))
    assert any("Torch SDPA" in v for v in _broken(VideoPlan(ring=4, attention="fa")))  # SM12x: fa runs SDPA
    assert not _broken(VideoPlan(ring=4, attention="sage_attn"))
    assert not _broken(VideoPlan(ring=4, attention="fa"), hw=H200)  # Hopper FA exposes the LSE


def test_rules_arch_heads_cfg_and_cache_dit():
    assert any("SpargeAttention" in v for v in _broken(VideoPlan(attention="sparge_attn")))
    assert not _broken(VideoPlan(attention="sparge_attn"), hw=H200)
    assert any("SM120" in v for v in _broken(VideoPlan(attention="fp8_fa_sm120"), hw=H200))
    assert any("heads" in v for v in _broken(VideoPlan(tp=2, ulysses=8)))  # 40 heads over 16 ranks
    no_cfg = dataclasses.replace(WORK, guidance=1.0)
    assert any("twice" in v for v in _broken(VideoPlan(cfg=2, ulysses=4), work=no_cfg))
    assert not _broken(VideoPlan(cfg=2, ulysses=4, cache_dit=True))


BASE = VideoPlan(replicas=1, tp=1, ulysses=4, ring=1, cfg=2, attention="sage_attn")
MOVES = {  # one change per searched dimension (plan.SPACE), each must move the predicted latency
    "tp": dict(tp=2, ulysses=2),
    "ulysses": dict(ulysses=2, ring=2),
    "ring": dict(ring=4, ulysses=1),
    "cfg": dict(cfg=1, ulysses=8),
    "attention": dict(attention="fa"),
    "density": dict(attention="video_sparse_attn", attention_config="sparsity=0.75", density=0.25),
    "cache_dit": dict(cache_dit=True),
    "dit_offload": dict(dit_offload=True),
    "text_encoder_offload": dict(text_encoder_offload=True),
}


@pytest.mark.parametrize("dimension", sorted(MOVES))
def test_each_searched_dimension_changes_the_prediction(dimension):
    base = video_cost(BASE, WAN22, WORK, PRO).latency_s
    moved = video_cost(dataclasses.replace(BASE, **MOVES[dimension]), WAN22, WORK, PRO).latency_s
    assert moved != pytest.approx(base, rel=1e-6)


def test_replicas_trade_latency_for_videos_per_hour():
    one = evaluate(VideoPlan(cfg=2, ulysses=4), WAN22, WORK, PRO)
    eight = evaluate(VideoPlan(replicas=8, dit_offload=True), WAN22, WORK, PRO)
    assert eight.cost.latency_s > 4 * one.cost.latency_s
    assert eight.videos_per_hour > one.videos_per_hour


def test_ring_hides_its_p2p_where_ulysses_pays_all_to_all_on_pcie():
    ring = video_cost(VideoPlan(ring=8, attention="sage_attn"), WAN22, WORK, PRO).forward_s
    ulysses = video_cost(VideoPlan(ulysses=8, attention="sage_attn"), WAN22, WORK, PRO).forward_s
    assert ulysses["ulysses_all2all"] > 0.1 * ulysses["attention"]
    assert ring["ring_p2p"] < ulysses["ulysses_all2all"]


def test_open_loop_overload_is_infinite_latency():
    heavy = dataclasses.replace(WORK, videos_per_hour=1000.0)
    out = evaluate(VideoPlan(cfg=2, ulysses=4), WAN22, heavy, PRO)
    assert out.p95_s == float("inf")
    light = evaluate(VideoPlan(cfg=2, ulysses=4), WAN22, dataclasses.replace(WORK, videos_per_hour=2.0), PRO)
    assert light.cost.latency_s * (1 - 1e-9) <= light.p50_s <= light.p95_s < 3 * light.cost.latency_s


def test_search_best_argv_passes_the_parser_and_the_rules():
    result = search(WAN22, WORK, PRO)
    best = result.ranked[0]
    assert not violations(best.plan, WAN22, WORK, PRO)
    launch = build_launch(best.plan, WAN22, PRO, [])
    argv = launch.processes[0].argv
    validate_argv(ENGINE, VERSION, argv)  # raises on a flag or value sglang serve would refuse
    assert argv[:2] == ("sglang", "serve") and "--ulysses-degree" in argv
    assert launch.endpoint.endswith("/v1/videos")
    exact = search(WAN22, WORK, PRO, keep_quality=True)
    assert all(o.exact for o in exact.ranked)
    default = evaluate(engine_default(WAN22, WORK, PRO), WAN22, WORK, PRO)
    assert (default.plan.cfg, default.plan.ulysses, default.plan.dit_offload) == (2, 4, True)


def test_emitter_refuses_broken_plans_and_bad_flags():
    with pytest.raises(MiTuneError, match="engine rule"):
        build_launch(VideoPlan(ring=2), WAN22, PRO, violations(VideoPlan(ring=2), WAN22, WORK, PRO))
    argv = server_argv(VideoPlan(cfg=2, ulysses=4), WAN22, "127.0.0.1", 8000)
    with pytest.raises(MiTuneError, match="does not accept"):
        validate_argv(ENGINE, VERSION, [*argv, "--ulysses-size", "4"])


def test_workload_checks_name_the_flag():
    with pytest.raises(MiTuneError, match="--frames"):
        check(VideoWorkload(frames=80))
    with pytest.raises(MiTuneError, match="--objective"):
        check(VideoWorkload(objective="goodput"))


def test_cli_search_serve_and_bad_input(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["search", "--model", "wan2.2-t2v-a14b", "--preset", "rtx-pro-6000-x8", "--out", str(out)]
    assert run([*args, "--steps", "40", "--frames", "81", "--width", "1280", "--height", "720"]) == 0
    report = (out / "report.md").read_text()
    assert "engine default" in report and "videos/hour" in report and "ring" in report and "sparse" in report
    doc = yaml.safe_load((out / "best.yaml").read_text())
    assert doc["best"]["videos_per_hour"] > 0 and doc["engine_default"]["latency_s"] > 0
    assert "fastest single video" in report
    assert run([*args, "--keep-quality", "--objective", "latency"]) == 0
    kept = yaml.safe_load((out / "best.yaml").read_text())["best"]
    assert kept["exact"] and not kept["changes_output"] and not kept["plan"]["cache_dit"]
    assert kept["plan"]["attention"] in ("fa", "torch_sdpa")
    capsys.readouterr()
    assert run(["serve", str(out / "best.yaml"), "--dry-run"]) == 0
    assert "sglang serve --model-path Wan-AI/Wan2.2-T2V-A14B-Diffusers" in capsys.readouterr().out
    wl = tmp_path / "w.yaml"
    wl.write_text("schema: mi-tune/video-workload/v1\nframes: 49\nfps: 16\n")
    assert run(["search", "--model", "wan2.1-t2v-14b", "--preset", "h200-x8", "--workload", str(wl)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown field 'fps'" in err
    assert run([*args, "--frames", "80"]) == 2
    assert "--frames" in capsys.readouterr().err


def test_measure_and_bench_on_the_stand_in(tmp_path, capsys):
    """`measure` launches the run's best plan as the video stand-in, benches it with the run's workload (polling
    the asynchronous job API) and writes measured.json; `bench --endpoint videos` reports P50/P95 and videos/hour."""
    out = tmp_path / "run"
    assert run(["search", "--model", "wan2.1-t2v-14b", "--preset", "h200-x8", "--out", str(out)]) == 0
    timing = tmp_path / "timing.json"
    timing.write_text('{"seconds_per_video": 0.05, "seconds_per_step": 0.001}')
    capsys.readouterr()
    assert run(["measure", str(out), "--stand-in", str(timing), "--port", "18491", "--num-requests", "6"]) == 0
    measured = yaml.safe_load((out / "measured.json").read_text())
    assert measured["measured"]["completed"] == 6 and measured["stand_in"] is True
    assert measured["measured"]["latency_p50_s"] >= 0.05 + 0.001 * 50  # 50 steps: the model's default
    bad = tmp_path / "bad.json"
    bad.write_text('{"seconds_per_frame": 1}')
    assert run(["measure", str(out), "--stand-in", str(bad), "--port", "18492"]) == 2
    assert "unknown keys seconds_per_frame" in capsys.readouterr().err


def test_video_tensor_parallel_all_reduce_runs_sglangs_dispatch():
    """SGLang Diffusion's TP group uses SGLang's custom all-reduce (multimodal_gen parallel_state.py:250), so the
    video model costs SGLang's dispatch, not vLLM's (the comm default): on an NVSwitch box at 8 ranks and 1 MiB vLLM
    0.34 runs FlashInfer's all-reduce, SGLang its custom kernel v2; before, the video model took vLLM's."""
    from autotune.perf import comm
    from autotune.video import perf as video_perf

    hw = load_preset("h200-x8")
    group, nbytes = tuple(range(8)), float(1 << 20)
    sglang = comm.all_reduce_s(hw, group, nbytes, engine="sglang")
    assert sglang != comm.all_reduce_s(hw, group, nbytes, engine="vllm")
    assert video_perf._comm_s(video_perf._Key(hw), "allreduce", group, nbytes) == sglang
