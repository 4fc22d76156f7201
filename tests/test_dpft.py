"""``method: dpft`` (DP-SGD fine-tuning, privtext.methods.dpft; privtext.mechanisms.dpsgd).

* the ledger's ε for a run's DP-SGD releases equals Opacus' accountants for the same steps: its PRV accountant to
  1e-3, and its RDP accountant to 1e-3 when the same events are accounted for with RDP (dp_accounting's RDP; the
  PLD the ledger uses is tighter than RDP, never looser);
* the path users run (``privtext run``) clips every record's gradient and adds the stated noise: one step of
  plain SGD is recomputed here record by record (no Opacus) and the difference must be Gaussian of the ledger's
  std — a χ² test with its tolerance from the number of coordinates — which fails when the clipping or the
  noise is removed (planted faults);
* resume after SIGKILL continues from the kept epoch (model and optimiser state): with reproducible noise the
  resumed run ends byte for byte where an uninterrupted run ends;
* LoRA through peft on a Hugging Face model the test builds, the torch noise source, the statement's assumptions,
  the configuration checks, and a GPU run where one is lent.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
opacus = pytest.importorskip("opacus")

from privtext.config import config_from_dict  # noqa: E402
from privtext.data import Corpus, load_corpus, write_corpus  # noqa: E402
from privtext.errors import ConfigError, PrivacyError  # noqa: E402
from privtext.privacy import Budget, Ledger, dpsgd_event, epsilon_for_delta  # noqa: E402
from privtext.privacy import noise as noise_mod  # noqa: E402
from privtext.privacy.relation import NeighbouringRelation  # noqa: E402
from privtext.privacy.release import dpsgd_release  # noqa: E402
from privtext.runner import run_config  # noqa: E402
from privtext.testing.tinyrun import toy_corpora  # noqa: E402

TINY_LM = {"size": "tiny", "max_length": 48, "epochs": 2.0, "train_tokens": None, "validation": 0,
           "precision": "fp32"}


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices, a shared machine: one thread is fastest
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def lm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dpft-lm")


def corpora(n_private: int = 47, seed: int = 0) -> tuple[Corpus, Corpus]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(seed), n_private=n_private, n_pool=160)
    return priv, pub


def make_config(root: Path, lm_cache: Path, *, priv: Corpus | None = None, pub: Corpus | None = None,
                privacy: dict[str, Any] | None = None, dpft: dict[str, Any] | None = None, seed: int = 3,
                labels: str = "public", **extra: Any) -> Any:
    if priv is None or pub is None:
        priv, pub = corpora()
    root.parent.mkdir(parents=True, exist_ok=True)
    write_corpus(priv, Path(f"{root}.private.csv"))
    write_corpus(pub, Path(f"{root}.public.csv"))
    raw: dict[str, Any] = {
        "method": "dpft", "seed": seed,
        "data": {"private": f"{root}.private.csv", "public": f"{root}.public.csv",
                 "label_columns": ["category", "mood"]},
        "embedder": {"backend": "hashing", "dim": 64, "cache": False},
        "evolution": {"num_samples": 8, "label_distribution": {"kind": labels}},
        "privacy": privacy or {"epsilon": 4.0, "delta": 1e-5},
        "dpft": {"sampling_rate": 0.25, "epochs": 2, "max_length": 48, "max_new_tokens": 24, "torch_threads": 1,
                 "lm": {**TINY_LM, "cache_dir": str(lm_cache)}, **(dpft or {})},
        "output": str(root), **extra,
    }
    return config_from_dict(raw)


def ledger_lines(root: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (root / "private" / "ledger.jsonl").read_text().splitlines() if x.strip()]


def kept(root: Path, key: str) -> dict[str, np.ndarray]:
    import re

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", key) + ".npz"
    (path,) = list((root / "private" / "checkpoints").rglob(f"releases/{safe}"))
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ------------------------------------------------------------------------------------------------ accounting


def _opacus_epsilons(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    from opacus.accountants import PRVAccountant, RDPAccountant

    prv = PRVAccountant()
    prv.history = [(sigma, q, steps)]
    rdp = RDPAccountant()
    rdp.history = [(sigma, q, steps)]
    return float(prv.get_epsilon(delta, eps_error=1e-4, delta_error=delta * 1e-4)), float(rdp.get_epsilon(delta))


@pytest.mark.parametrize(("sigma", "q", "epochs"), [(1.0, 1 / 16, 3), (1.6, 0.2, 4)])
def test_ledger_epsilon_equals_opacus_accountants(sigma: float, q: float, epochs: int) -> None:
    """One release per epoch, as the method records them: the ledger's ε (dp_accounting PLD) is Opacus' PRV ε to
    1e-3; the same events under RDP (dp_accounting, Opacus' orders) give Opacus' RDP ε to 1e-3; PLD ≤ RDP."""
    import dp_accounting
    from opacus.accountants import RDPAccountant

    from privtext.mechanisms.dpsgd import dpsgd_contribution

    delta = 1e-5
    per_epoch = round(1 / q)
    ledger = Ledger(None, Budget.noise(delta))
    for e in range(epochs):
        ledger.record(dpsgd_release(f"dpsgd/epoch_{e:03d}", noise_multiplier=sigma, sampling_rate=q, steps=per_epoch,
                                    contribution=dpsgd_contribution(1.0), relation=NeighbouringRelation.add_remove(),
                                    iteration=e))
    eps = ledger.spent()["epsilon_at_report_delta"]
    e_prv, e_rdp = _opacus_epsilons(sigma, q, per_epoch * epochs, delta)
    assert eps == pytest.approx(e_prv, abs=1e-3)
    acc = dp_accounting.rdp.RdpAccountant(orders=RDPAccountant.DEFAULT_ALPHAS)
    for e in ledger.entries:
        acc.compose(e.release.event)
    assert acc.get_epsilon(delta) == pytest.approx(e_rdp, abs=1e-3)
    assert eps <= e_rdp


def test_a_run_records_the_events_it_calibrated_and_spends_its_budget(tmp_path: Path, lm_cache: Path) -> None:
    """A run with a DP label histogram: σ is calibrated so that the composition meets (ε, δ) — the ledger's ε is
    within 1e-3 below the budget — and every epoch's event is SelfComposed(PoissonSampled(q, Gaussian(σ)))."""
    cfg = make_config(tmp_path / "run", lm_cache, labels="dp")
    with noise_mod.trace() as draws:
        root = run_config(cfg)
    lines = ledger_lines(root)
    assert [x["key"] for x in lines] == ["labels/histogram", "dpsgd/epoch_000", "dpsgd/epoch_001"]
    st = json.loads((root / "privacy.json").read_text())
    sigma = st["parameters"]["noise_multiplier"]
    for x in lines[1:]:
        assert x["event"] == {"type": "SelfComposedDpEvent", "count": 4, "event": {
            "type": "PoissonSampledDpEvent", "sampling_probability": 0.25,
            "event": {"type": "GaussianDpEvent", "noise_multiplier": sigma}}}
        assert x["sensitivity"] == 1.0 and x["noise_std"] == pytest.approx(sigma)
        steps = [d for d in draws if d.release == x["key"]]
        assert len(steps) == 4 and all(d.scale_max == pytest.approx(sigma) for d in steps)
    eps = st["guarantee"]["spent"]["epsilon"]
    assert 4.0 - 1e-3 < eps <= 4.0
    assert st["private"] is True and "DP-SGD fine-tuning" in st["headline"]
    assert len((root / "synthetic.jsonl").read_text().splitlines()) == 8
    # the audit derives every release again (Δ = C for the epochs, 1 for the label histogram) and agrees
    from privtext.audit import audit_run

    audited = audit_run(root, attack=False)
    assert {r.mechanism.split(" ")[0] for r in audited} == {"dpsgd", "labels_gaussian"}
    assert all(r.passed for r in audited), audited
    assert {r.check for r in audited} == {"derivation", "calibration"}  # Δ and σ derived from the configuration


def test_an_unlabelled_public_corpus_gets_the_declared_codes_for_fine_tuning_to_learn(tmp_path: Path,
                                                                                     lm_cache: Path) -> None:
    """Public text without labels and a declared schema (``data.label_values``): the small public LM reserves a
    code per declared value (untrained), DP-SGD trains on records that carry them, and the samples are drawn
    under them — so the fine-tuning can make an unlabelled public model label-conditioned (CTCL's road). Without
    the reserve the codes would be missing from both, and the samples could not follow the DP label mix."""
    from privtext.backends import parse_options
    from privtext.generate.lm import SamplingSettings, build_public_lm
    from privtext.generate.lm.backend import LMOptions
    from privtext.methods.dpft.models import PublicSmallLM

    priv, pub = corpora()
    bare = Corpus(pub.ids, pub.texts, {}, name="pool")
    schema = {"category": ["food", "hotel"], "mood": ["good", "bad"]}
    root = run_config(make_config(tmp_path / "unlabelled", lm_cache, priv=priv, pub=bare, labels="dp",
                                  data={"private": f"{tmp_path / 'unlabelled'}.private.csv",
                                        "public": f"{tmp_path / 'unlabelled'}.public.csv",
                                        "label_columns": ["category", "mood"], "label_values": schema}))
    st = json.loads((root / "privacy.json").read_text())
    assert "4 label code(s) of the declared schema" in st["headline"]
    prompts = [json.loads(x)["prompt"] for x in (root / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == 8 and all("<|category=" in p and "<|mood=" in p for p in prompts)
    lo = parse_options(LMOptions, {**TINY_LM, "cache_dir": str(lm_cache)}, where="test")
    lm = build_public_lm(bare.texts, None, settings=lo.settings(), cache_dir=lo.cache_dir, device="cpu",
                         reserve_codes=schema)
    assert lm.info["cache"] == "hit"  # the run's model
    assert lm.info["untrained_codes"] == ["<|category=food|>", "<|category=hotel|>", "<|mood=bad|>",
                                          "<|mood=good|>"]
    wte = lm.model.get_input_embeddings().weight.detach().clone()
    m = PublicSmallLM(lm, max_length=48, sampling=SamplingSettings())
    codes = m.encoder.label_ids({"category": "hotel", "mood": "bad"})[0]
    assert len(codes) == 2 and m.training_sequence(priv.texts[0], {"category": "hotel", "mood": "bad"})[1:3] == codes
    # the reserved rows start from their values' words, so the codes differ as the words do (pretraining left
    # them nearly parallel); every other row is untouched
    now = lm.model.get_input_embeddings().weight.detach()
    code = {v: m.encoder.label_id[("category", v)] for v in ("food", "hotel")}
    words = {v: now[m.encoder.text_ids(v)].mean(dim=0) for v in ("food", "hotel")}
    cos = torch.nn.functional.cosine_similarity
    for v, other in (("food", "hotel"), ("hotel", "food")):
        assert float(cos(now[code[v]], words[v], dim=0)) > 0.999
        assert float(cos(now[code[v]], words[other], dim=0)) < float(cos(now[code[v]], words[v], dim=0)) - 0.05
    changed = (now != wte).any(dim=1).nonzero().flatten().tolist()
    assert sorted(changed) == sorted(m.encoder.label_id.values())
    plain = build_public_lm(bare.texts, None, settings=lo.settings(), cache_dir=lo.cache_dir, device="cpu")
    assert plain.encoder.label_ids({"category": "hotel", "mood": "bad"}) == ([], ["category", "mood"])
    # dpft.reserve_codes: false gives the former behaviour back: no codes in the prompts, none in the statement
    off = run_config(make_config(tmp_path / "off", lm_cache, priv=priv, pub=bare, labels="dp",
                                 dpft={"reserve_codes": False, "epochs": 1},
                                 data={"private": f"{tmp_path / 'off'}.private.csv",
                                       "public": f"{tmp_path / 'off'}.public.csv",
                                       "label_columns": ["category", "mood"], "label_values": schema}))
    assert "label code(s)" not in json.loads((off / "privacy.json").read_text())["headline"]
    assert not any("<|category=" in json.loads(x)["prompt"] for x in (off / "prompts.jsonl").read_text().splitlines())


def test_a_reserved_code_starts_from_the_words_that_tell_its_value_apart() -> None:
    from privtext.methods.dpft.models import _distinct_words

    assert _distinct_words(["Business Category: Bars", "Business Category: Arts & Entertainment"]) == [
        "Bars", "Arts & Entertainment"]
    assert _distinct_words(["Review Stars: 1.0", "Review Stars: 5.0"]) == ["1.0", "5.0"]
    assert _distinct_words(["good", "bad"]) == ["good", "bad"]
    assert _distinct_words(["a b", "a b c"]) == ["a b", "c"]  # a value that is all shared words keeps them
    assert _distinct_words(["only"]) == ["only"]


# ------------------------------------------------------------------------------------------------ clipping + noise


def _clean_step(root: Path, lm_cache: Path, cfg: Any, clip: float) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """θ₀ (the public model, from the cache) and Σᵢ clip(∇ℓᵢ(θ₀), C) computed here record by record, without
    Opacus, for the run's private records. ℓᵢ is the loss of the text given the codes (``dpft.loss_on: text``,
    the default): the prompt ``<|bos|> codes <|text|>`` holds no target."""
    from privtext.generate.lm import PAD, build_public_lm, collate, sequence_losses
    from privtext.generate.lm.backend import LMOptions
    from privtext.generate.lm.train import IGNORE

    pub = load_corpus(cfg.data.public, label_columns=["category", "mood"], name="public")
    priv = load_corpus(cfg.data.private, label_columns=["category", "mood"], name="private")
    lm = build_public_lm(pub.texts, pub.labels, settings=LMOptions(**TINY_LM).settings(), cache_dir=lm_cache)
    model = lm.model
    model.train()
    names = [n for n, p in model.named_parameters()]
    theta0 = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    total = {n: np.zeros_like(v, dtype=np.float64) for n, v in theta0.items()}
    for i, text in enumerate(priv.texts):
        label = {c: priv.labels[c][i] for c in ("category", "mood")}
        seq = lm.encoder.record(text, label)[:48]
        batch = collate([seq], pad_id=PAD)
        batch["labels"][0, :len(lm.encoder.free(lm.encoder.label_ids(label)[0], None))] = IGNORE
        model.zero_grad(set_to_none=True)
        sequence_losses(model, batch).mean().backward()
        grads = {n: p.grad.detach().double().numpy() for n, p in model.named_parameters()}
        norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
        f = min(1.0, clip / (norm + 1e-6))
        for n in names:
            total[n] += f * grads[n]
    return theta0, total


def _one_sgd_step_run(tmp_path: Path, lm_cache: Path, sigma: float, clip: float,
                      devices: list[str] | None = None) -> tuple[Path, Any]:
    cfg = make_config(tmp_path / "sgd", lm_cache, privacy={"noise_multiplier": sigma},
                      dpft={"sampling_rate": 1.0, "epochs": 1, "optimizer": "sgd", "lr": 1.0, "batch_size": 1,
                            "max_grad_norm": clip, "devices": devices})
    return run_config(cfg), cfg


def _residual_chi2(tmp_path: Path, lm_cache: Path, sigma: float = 0.5, clip: float = 0.01,
                   devices: list[str] | None = None) -> tuple[float, int]:
    """One SGD step (q = 1, lr = 1, B = 1) run by ``privtext run``: θ₁ = θ₀ − (Σ clip(gᵢ) + z). The residual
    θ₀ − θ₁ − Σ clip(gᵢ) must be z ~ N(0, (σC)²) per coordinate: returns Σ r²/(σC)² and the coordinates.
    ``devices``: the step's records split over that many processes (``dpft.devices``)."""
    root, cfg = _one_sgd_step_run(tmp_path, lm_cache, sigma, clip, devices)
    theta0, clipped = _clean_step(root, lm_cache, cfg, clip)
    theta1 = kept(root, "dpsgd/epoch_000")
    (entry,) = [x for x in ledger_lines(root) if x["key"] == "dpsgd/epoch_000"]
    std = entry["noise_std"]
    assert std == pytest.approx(sigma * clip)
    chi2, d = 0.0, 0
    for n, v in theta0.items():
        r = v.astype(np.float64) - theta1[f"model/{n}"].astype(np.float64) - clipped[n]
        chi2 += float((r ** 2).sum()) / std ** 2
        d += r.size
    return chi2, d


TWO_CPUS = ["cpu", "cpu"]
DEVICES = [None, pytest.param(TWO_CPUS, id="two-processes")]


@pytest.mark.parametrize("devices", DEVICES)
def test_the_run_clips_every_record_and_adds_the_stated_noise(devices: list[str] | None, tmp_path: Path,
                                                              lm_cache: Path) -> None:
    """C = 0.01 is far below the records' gradient norms, so without clipping the residual would be ~100× the
    noise; without noise it would be ~0. Σr²/(σC)² is χ² with d degrees of freedom: within 6·√(2d) of d. With two
    processes (``dpft.devices``) the records are split between the driver and a worker, the clipped sums added
    and the noise drawn once: the same check holds."""
    chi2, d = _residual_chi2(tmp_path, lm_cache, devices=devices)
    assert d > 100_000
    assert abs(chi2 - d) < 6 * math.sqrt(2 * d), (chi2, d)


@pytest.mark.parametrize("devices", DEVICES)
def test_the_clipping_check_catches_a_run_without_clipping(devices: list[str] | None, tmp_path: Path,
                                                           lm_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opacus.optimizers import DPOptimizer

    real = DPOptimizer.clip_and_accumulate

    def no_clip(self: Any) -> None:
        c = self.max_grad_norm
        self.max_grad_norm = 1e12  # the planted fault: every record's gradient passes unclipped
        try:
            real(self)
        finally:
            self.max_grad_norm = c

    monkeypatch.setattr(DPOptimizer, "clip_and_accumulate", no_clip)  # the driver's share (half, with 2 devices)
    chi2, d = _residual_chi2(tmp_path, lm_cache, devices=devices)
    assert chi2 - d > 6 * math.sqrt(2 * d)


@pytest.mark.parametrize("devices", DEVICES)
def test_the_noise_check_catches_a_run_without_noise(devices: list[str] | None, tmp_path: Path, lm_cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import privtext.mechanisms.dpsgd as dpsgd

    monkeypatch.setattr(dpsgd, "add_gaussian", lambda v, std, rng, **kw: np.asarray(v, dtype=np.float64))
    chi2, d = _residual_chi2(tmp_path, lm_cache, devices=devices)
    assert d - chi2 > 6 * math.sqrt(2 * d)


def test_the_check_catches_a_worker_that_does_not_clip(tmp_path: Path, lm_cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted fault in the worker process: it is sent a clipping norm of 10¹² (the driver still clips)."""
    from privtext.mechanisms import dpsgd_workers

    real = dpsgd_workers.GradientWorkers.__init__

    def unclipped_worker(self: Any, *a: Any, max_grad_norm: float, **kw: Any) -> None:
        real(self, *a, max_grad_norm=1e12, **kw)

    monkeypatch.setattr(dpsgd_workers.GradientWorkers, "__init__", unclipped_worker)
    chi2, d = _residual_chi2(tmp_path, lm_cache, devices=TWO_CPUS)
    assert chi2 - d > 6 * math.sqrt(2 * d)


def test_the_check_catches_records_counted_by_two_processes(tmp_path: Path, lm_cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted fault: the driver takes the whole batch instead of its share, so the worker's records are in
    the sum twice (a sensitivity of 2C for them). Their extra clipped gradients (norm ≤ 23·C) are small next to
    the noise at σ = 0.5, so the check runs at σ = 0.05, where the fault-free run still passes."""
    from privtext.mechanisms import dpsgd_workers

    chi2, d = _residual_chi2(tmp_path / "clean", lm_cache, sigma=0.05, devices=TWO_CPUS)
    assert abs(chi2 - d) < 6 * math.sqrt(2 * d), (chi2, d)
    monkeypatch.setattr(dpsgd_workers, "share", lambda idx, rank, world: idx)
    chi2, d = _residual_chi2(tmp_path / "twice", lm_cache, sigma=0.05, devices=TWO_CPUS)
    assert chi2 - d > 6 * math.sqrt(2 * d), (chi2, d)


@pytest.mark.parametrize("lora", [None, pytest.param({"r": 2}, id="lora-and-code-deltas")])
def test_two_processes_reach_the_parameters_of_one(lora: dict[str, Any] | None, tmp_path: Path,
                                                   lm_cache: Path) -> None:
    """With reproducible noise (the same Poisson samples and the same noise), two epochs of AdamW on two processes
    end where one process ends, up to float summation order, and record the same releases. With LoRA the worker
    gets the adapters and the code deltas (the wrapped embedding crosses the process boundary)."""
    if lora is not None:
        pytest.importorskip("peft")
    privacy = {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True}
    extra = {"lora": lora} if lora is not None else {}
    one = run_config(make_config(tmp_path / "one", lm_cache, privacy=privacy, dpft=extra))
    two = run_config(make_config(tmp_path / "two", lm_cache, privacy=privacy, dpft={"devices": TWO_CPUS, **extra}))
    a, b = kept(one, "dpsgd/epoch_001"), kept(two, "dpsgd/epoch_001")
    assert a.keys() == b.keys() and any(k.startswith("optim/") for k in a)
    assert (lora is not None) == any("wte.delta" in k for k in a)
    moved = max(float(np.abs(a[k] - kept(one, "dpsgd/epoch_000")[k]).max()) for k in a if k.startswith("model/"))
    assert moved > 1e-4  # the parameters did move, so agreement is not trivial
    # AdamW divides by √v: where a coordinate's gradients are tiny, summation order shows more (measured with LoRA:
    # 7 of 512 delta coordinates off by ≤ 1.8e-6, 0.4 % of one step of lr 5e-4; a worker that dropped its share
    # would be off by whole steps)
    atol = 1e-6 if lora is None else 1e-5
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=atol, err_msg=k)

    def entries(root: Path) -> list[dict[str, Any]]:
        return [{k: v for k, v in x.items() if k != "time"} for x in ledger_lines(root)]

    assert entries(two) == entries(one) and len(entries(one)) == 2
    assert "DP-SGD on 2 devices: cpu, cpu" in (two / "private" / "log.txt").read_text()


def test_a_worker_killed_mid_epoch_stops_the_run_and_resume_finishes_it(tmp_path: Path, lm_cache: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker process is SIGKILLed at its 6th step (epoch 2 of 2, 4 steps each): the driver stops with a
    BackendError at the next collective instead of waiting; epoch 2 was recorded before it ran, epoch 1 kept.
    ``resume`` (workers started afresh) reloads epoch 1, spends nothing more and ends where an uninterrupted run
    ends (reproducible noise)."""
    from privtext.errors import BackendError
    from privtext.runner import resume_run

    privacy = {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True}
    whole = run_config(make_config(tmp_path / "whole", lm_cache, privacy=privacy))
    cfg = make_config(tmp_path / "killed", lm_cache, privacy=privacy, dpft={"devices": TWO_CPUS})
    monkeypatch.setenv("PRIVTEXT_FAULT", "dpsgd_worker:1:step_005")
    with pytest.raises(BackendError, match="DP-SGD on 2 devices stopped"):
        run_config(cfg)
    root = Path(cfg.output)
    assert [x["key"] for x in ledger_lines(root)] == ["dpsgd/epoch_000", "dpsgd/epoch_001"]
    assert not (root / "synthetic.jsonl").exists()
    monkeypatch.delenv("PRIVTEXT_FAULT")
    resume_run(root)
    assert [x["key"] for x in ledger_lines(root)] == ["dpsgd/epoch_000", "dpsgd/epoch_001"]
    a, b = kept(whole, "dpsgd/epoch_001"), kept(root, "dpsgd/epoch_001")
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-6, err_msg=k)


def test_gloo_is_pointed_at_the_loopback_interface_only_while_the_group_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from privtext.mechanisms.dpsgd_workers import _loopback_gloo

    if not any(name.startswith("lo") for _, name in socket.if_nameindex()):
        pytest.skip("no loopback interface named lo*")
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    with _loopback_gloo("gloo"):
        assert os.environ["GLOO_SOCKET_IFNAME"].startswith("lo")
    assert "GLOO_SOCKET_IFNAME" not in os.environ
    with _loopback_gloo("nccl"):
        assert "GLOO_SOCKET_IFNAME" not in os.environ
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")  # the user's choice is kept
    with _loopback_gloo("gloo"):
        assert os.environ["GLOO_SOCKET_IFNAME"] == "eth7"
    assert os.environ["GLOO_SOCKET_IFNAME"] == "eth7"


def test_shares_partition_the_batch() -> None:
    from privtext.mechanisms.dpsgd_workers import share

    rng = np.random.default_rng(0)
    for world in (1, 2, 3, 5):
        for n in (0, 1, 7, 64):
            idx = np.sort(rng.choice(1000, size=n, replace=False))
            parts = [share(idx, r, world) for r in range(world)]
            assert sorted(np.concatenate(parts).tolist()) == idx.tolist()
            assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1


# ------------------------------------------------------------------------------------------------ resume


def _privtext(*args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRIVTEXT_QUIET": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PRIVTEXT_FAULT", None)
    if fault:
        env["PRIVTEXT_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "privtext", *args], env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.parametrize("fault", ["after_save:dpsgd/epoch_000",
                                   pytest.param("after_record:dpsgd/epoch_001", marks=pytest.mark.slow)])
def test_sigkill_then_resume_continues_from_the_kept_epoch(fault: str, tmp_path: Path, lm_cache: Path) -> None:
    """Killed after epoch 0 was kept (or after epoch 1 was recorded, mid-epoch), ``privtext resume`` reloads
    epoch 0 (model and AdamW state) without new noise or a new ledger entry and trains epoch 1 from it. With
    reproducible noise the result equals an uninterrupted run's byte for byte: had the optimiser state not been
    restored, epoch 1 would differ."""
    whole = run_config(make_config(tmp_path / "whole", lm_cache, privacy={"epsilon": 4.0, "delta": 1e-5,
                                                                          "reproducible_noise": True}))
    cfg = make_config(tmp_path / "killed", lm_cache, privacy={"epsilon": 4.0, "delta": 1e-5,
                                                              "reproducible_noise": True})
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg.dump()))
    p = _privtext("run", str(path), fault=fault)
    assert p.returncode == -9, p.stderr[-2000:]
    root = Path(cfg.output)
    before = kept(root, "dpsgd/epoch_000")
    r = _privtext("resume", str(root))
    assert r.returncode == 0, r.stderr[-2000:]
    keys = [x["key"] for x in ledger_lines(root)]
    assert keys == ["dpsgd/epoch_000", "dpsgd/epoch_001"]
    after = kept(root, "dpsgd/epoch_000")
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    a, b = kept(whole, "dpsgd/epoch_001"), kept(root, "dpsgd/epoch_001")
    assert a.keys() == b.keys() and any(k.startswith("optim/") for k in a)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert (root / "synthetic.jsonl").read_text() == (whole / "synthetic.jsonl").read_text()


# ------------------------------------------------------------------------------------------------ models


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from privtext.testing.tiny_lm import make_tiny_gpt2

    _, pub = corpora()
    words = [*pub.texts, "category : food hotel", "mood : good bad"]
    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2") / "m", sentences=words)


def test_lora_trains_only_the_adapters_of_a_hugging_face_model(tmp_path: Path, lm_cache: Path,
                                                               tiny_hf: Path) -> None:
    pytest.importorskip("peft")
    root = run_config(make_config(tmp_path / "lora", lm_cache, dpft={
        "model": str(tiny_hf), "lora": {"r": 2, "target_modules": ["c_attn"]}, "epochs": 1}))
    state = kept(root, "dpsgd/epoch_000")
    names = [k for k in state if k.startswith("model/")]
    assert names and all("lora_" in k for k in names)
    st = json.loads((root / "privacy.json").read_text())
    assert "LoRA adapters (rank 2)" in st["headline"] and st["private"] is True
    assert len((root / "synthetic.jsonl").read_text().splitlines()) == 8


LORA_DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", LORA_DEVICES)
def test_lora_adapters_built_in_privtexts_order_get_every_records_clipped_gradient(device: str,
                                                                                 tiny_hf: Path) -> None:
    """Opacus issue #820: with peft ≥ 0.14 a model moved to its device after ``get_peft_model`` trained LoRA
    weights that were silently unusable. privtext moves the model first (``HFCausalLM``; the small public LM is
    built on its device). One DP-SGD step of plain SGD (q = 1, lr = 1, B = 1, no noise) through privtext's
    ``make_private``/``dpsgd_steps`` must move every adapter by exactly −Σᵢ clip(∇ℓᵢ, C), the per-record gradients
    computed here without Opacus on a second copy built the same way (clipped jointly over the adapters), and
    the moved adapters must be the ones the model's forward pass uses (its logits change, and equal those of the
    copy given the trained adapters). Fails with the clipping removed, or with the adapters disabled after
    training (both planted once). GPU variant: marker ``gpu``, skipped without CUDA (peft's lazy device handling is where #820 bit)."""
    pytest.importorskip("peft")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from privtext.mechanisms.dpsgd import dpsgd_steps, make_private, unwrap
    from privtext.methods.dpft.models import HFCausalLM, SequenceLoss, prompt_length

    dev = torch.device(device)
    lora = {"r": 2, "target_modules": ["c_attn"]}

    def build() -> Any:
        return HFCausalLM(str(tiny_hf), device=dev, max_length=32, lora=lora, temperature=1.0, top_p=1.0, top_k=0,
                          max_new_tokens=4, min_new_tokens=1, batch_size=4, init_seed=17)

    priv, _ = corpora()
    m, ref = build(), build()
    assert all(p.device.type == dev.type for p in m.model.parameters())
    for mod in [*m.model.modules(), *ref.model.modules()]:  # GPT-2's dropout (0.1) would differ between copies
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    rows = [{"category": priv.labels["category"][i], "mood": priv.labels["mood"][i]} for i in range(6)]
    seqs = [m.training_sequence(t, r) for t, r in zip(priv.texts[:6], rows, strict=True)]
    starts = [prompt_length(x, m.prompt(r)) for x, r in zip(seqs, rows, strict=True)]
    params = m.trainable()
    assert params and all("lora_" in n for n, _ in params)
    with torch.random.fork_rng(devices=[]):  # the LoRA B matrices start at 0: give them a value first
        torch.manual_seed(0)
        with torch.no_grad():
            for (n, p), (n2, p2) in zip(params, ref.trainable(), strict=True):
                assert n == n2
                if "lora_B" in n:
                    p.copy_(0.05 * torch.randn_like(p))
                p2.copy_(p)
    theta0 = {n: p.detach().double().cpu().numpy().copy() for n, p in params}
    ids = torch.as_tensor([seqs[0]], device=dev)
    m.model.eval()
    with torch.no_grad():
        before = m.model(input_ids=ids).logits.double().cpu().numpy()
    C = 0.01
    gs, opt = make_private(m.model, torch.optim.SGD([p for _, p in params], lr=1.0), max_grad_norm=C, normaliser=1)
    loss_of = SequenceLoss(seqs, m.pad_id, starts).make(gs, dev)
    dpsgd_steps(gs, opt, n_records=len(seqs), loss_of=loss_of, steps=1, sampling_rate=1.0, noise_std=0.0,
                sensitivity=C, rng=np.random.default_rng(0))
    unwrap(gs)
    # the reference: each record's gradient over the adapters, clipped jointly, summed (no Opacus)
    from privtext.generate.lm.train import IGNORE, collate, sequence_losses

    rp = ref.trainable()
    total = {n: np.zeros_like(v) for n, v in theta0.items()}
    ref.model.train()
    for i, x in enumerate(seqs):
        batch = collate([x], pad_id=ref.pad_id, device=dev)
        batch["labels"][0, :starts[i]] = IGNORE
        ref.model.zero_grad(set_to_none=True)
        sequence_losses(ref.model, batch).mean().backward()
        g = {n: p.grad.detach().double().cpu().numpy() for n, p in rp}
        f = min(1.0, C / (math.sqrt(sum(float((v ** 2).sum()) for v in g.values())) + 1e-6))
        for n in total:
            total[n] += f * g[n]
    for n, p in params:
        step = theta0[n] - p.detach().double().cpu().numpy()
        np.testing.assert_allclose(step, total[n], rtol=1e-4, atol=1e-4 * np.abs(total[n]).max(), err_msg=n)
        assert np.abs(step).max() > 0, f"{n} did not move"
    m.model.eval()
    with torch.no_grad():
        after = m.model(input_ids=ids).logits.double().cpu().numpy()
        for (_, p), (_, p2) in zip(params, rp, strict=True):
            p2.copy_(p)
        ref.model.eval()
        copy = ref.model(input_ids=ids).logits.double().cpu().numpy()
    assert np.abs(after - before).max() > 1e-6  # the trained adapters are the ones the forward pass uses
    np.testing.assert_allclose(after, copy, rtol=1e-5, atol=1e-6)


def test_lora_on_the_small_public_lm_trains_only_its_adapters_at_the_same_privacy(tmp_path: Path,
                                                                                 lm_cache: Path) -> None:
    """dpft.lora without dpft.model puts peft adapters on the small public GPT-2 (c_attn): the release keeps only
    the adapters and the label codes' deltas (``dpft.train_codes``, the default), they moved (the noise reached
    them) — the deltas on the code rows only — and the ledger's σ and ε are those of full fine-tuning (LoRA
    changes d, not the accounting). ``train_codes: false`` keeps the adapters alone."""
    pytest.importorskip("peft")
    root = run_config(make_config(tmp_path / "lora", lm_cache, dpft={"lora": {"r": 2}, "epochs": 1}))
    state = kept(root, "dpsgd/epoch_000")
    names = [k for k in state if k.startswith("model/")]
    (delta,) = [k for k in names if "wte.delta" in k]
    assert names and all("lora_" in k and "c_attn" in k for k in names if k != delta)
    assert any(np.abs(state[k]).max() > 0 for k in names if "lora_B" in k)  # B starts at 0: DP-SGD moved it
    rows = state[delta]
    assert rows.shape[0] == 4 and np.all(np.abs(rows).max(axis=1) > 0)  # 2 categories + 2 moods, all moved
    plain = run_config(make_config(tmp_path / "plain", lm_cache,
                                   dpft={"lora": {"r": 2}, "epochs": 1, "train_codes": False}))
    assert all("lora_" in k for k in kept(plain, "dpsgd/epoch_000") if k.startswith("model/"))
    st = json.loads((root / "privacy.json").read_text())
    assert "LoRA adapters (rank 2)" in st["headline"] and st["private"] is True
    assert len((root / "synthetic.jsonl").read_text().splitlines()) == 8
    full = run_config(make_config(tmp_path / "full", lm_cache, dpft={"epochs": 1}))
    sig = [(x.get("key"), x.get("noise_std"), x.get("epsilon")) for x in ledger_lines(root)]
    assert sig == [(x.get("key"), x.get("noise_std"), x.get("epsilon")) for x in ledger_lines(full)]


def test_the_small_lms_sampler_draws_from_the_adapted_model(lm_cache: Path) -> None:
    """peft injects the adapters into the model the lm generator samples from (not a copy): a non-zero adapter
    changes the logits the sampler sees."""
    pytest.importorskip("peft")
    from privtext.backends import parse_options
    from privtext.generate.lm import SamplingSettings, build_public_lm
    from privtext.generate.lm.backend import LMOptions
    from privtext.methods.dpft.models import PublicSmallLM

    _, pub = corpora()
    lo = parse_options(LMOptions, {**TINY_LM, "cache_dir": str(lm_cache)}, where="test")
    lm = build_public_lm(pub.texts, None, settings=lo.settings(), cache=lo.cache, cache_dir=lo.cache_dir,
                         device="cpu")
    x = torch.tensor([[1, 5, 6, 7, 8]])
    before = lm.model(input_ids=x).logits.detach().clone()
    m = PublicSmallLM(lm, max_length=48, sampling=SamplingSettings(), lora={"r": 2})
    assert torch.equal(lm.model(input_ids=x).logits, before)  # B = 0: the adapted model starts as the public one
    with torch.no_grad():
        for n, p in m.trainable():
            assert "lora_" in n
            p.add_(0.5)
    assert not torch.allclose(lm.model(input_ids=x).logits, before)


def test_a_hugging_face_model_is_fully_fine_tuned_without_lora(tmp_path: Path, lm_cache: Path, tiny_hf: Path) -> None:
    from transformers import AutoModelForCausalLM

    root = run_config(make_config(tmp_path / "full", lm_cache, dpft={"model": str(tiny_hf), "epochs": 1}))
    state = kept(root, "dpsgd/epoch_000")
    base = dict(AutoModelForCausalLM.from_pretrained(tiny_hf).named_parameters())
    assert {k.removeprefix("model/") for k in state if k.startswith("model/")} == set(base)
    moved = [n for n, p in base.items() if not np.array_equal(p.detach().numpy(), state[f"model/{n}"])]
    assert len(moved) == len(base)  # every parameter got noise


def test_torch_noise_source_draws_the_stated_std_through_the_tracer() -> None:
    """``noise_source: torch``: the draws go through privacy.noise.add_gaussian_torch (traced) with std σC, and
    the update minus the clipped sum has that std."""
    from privtext.generate.lm import PAD, build_model, collate, model_shape, sequence_losses
    from privtext.mechanisms.dpsgd import dpsgd_steps, make_private

    torch.manual_seed(0)
    model = build_model(model_shape("tiny", n_positions=16, vocab_size=300), vocab_size=300, bos_id=0, eos_id=1,
                        pad_id=PAD)
    seqs = [[int(x) for x in np.random.default_rng(i).integers(10, 300, 8)] for i in range(5)]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=1.0), max_grad_norm=1e-9, normaliser=1)
    with noise_mod.trace() as draws:
        dpsgd_steps(gs, opt, n_records=5, loss_of=lambda idx: sequence_losses(
            gs, collate([seqs[int(i)] for i in idx], pad_id=PAD)).mean(), steps=1, sampling_rate=1.0,
            noise_std=0.3, sensitivity=1e-9, rng=np.random.default_rng(1), noise_source="torch")
    assert draws and all(d.kind == "gaussian" and d.scale_max == pytest.approx(0.3) for d in draws)
    diffs = torch.cat([(before[n] - p.detach()).reshape(-1) for n, p in model.named_parameters()])
    assert sum(d.size for d in draws) == diffs.numel()
    d = diffs.numel()  # the clipped sum is ≤ 5e-9: the update is the noise
    chi2 = float((diffs.double() ** 2).sum()) / 0.09
    assert abs(chi2 - d) < 6 * math.sqrt(2 * d)


@pytest.mark.parametrize("lr", [1e30, 0.1])
def test_a_diverging_step_stops_the_release_with_an_error(lr: float) -> None:
    """A step that leaves the weights non-finite (lr 1e30 here: a too large dpft.lr) stops DP-SGD with an error
    naming dpft.lr, instead of sampling garbage from NaN weights; a sane lr runs the same steps through."""
    from privtext.errors import BackendError
    from privtext.generate.lm import PAD, build_model, collate, model_shape, sequence_losses
    from privtext.mechanisms.dpsgd import dpsgd_steps, make_private

    torch.manual_seed(0)
    model = build_model(model_shape("tiny", n_positions=16, vocab_size=300), vocab_size=300, bos_id=0, eos_id=1,
                        pad_id=PAD)
    seqs = [[int(x) for x in np.random.default_rng(i).integers(10, 300, 8)] for i in range(6)]
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=lr), max_grad_norm=1.0, normaliser=6)
    kw = dict(n_records=6, loss_of=lambda idx: sequence_losses(gs, collate([seqs[int(i)] for i in idx],
                                                                          pad_id=PAD)).mean(),
              steps=4, sampling_rate=1.0, noise_std=1.0, sensitivity=1.0, rng=np.random.default_rng(1))
    if lr > 1:
        with pytest.raises(BackendError, match=r"DP-SGD diverged.*dpft\.lr"):
            dpsgd_steps(gs, opt, **kw)
    else:
        stats, _ = dpsgd_steps(gs, opt, **kw)
        assert stats.steps == 4 and all(math.isfinite(x) for x in stats.losses)


def test_the_optimiser_refuses_a_noise_scale_for_another_clipping_norm() -> None:
    from privtext.generate.lm import PAD, build_model, model_shape
    from privtext.mechanisms.dpsgd import dpsgd_steps, make_private

    model = build_model(model_shape("tiny", n_positions=16, vocab_size=300), vocab_size=300, bos_id=0, eos_id=1,
                        pad_id=PAD)
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=1.0), max_grad_norm=1.0, normaliser=1)
    with pytest.raises(PrivacyError, match="clips at 1"):
        dpsgd_steps(gs, opt, n_records=3, loss_of=lambda idx: None, steps=1, sampling_rate=0.5, noise_std=2.0,
                    sensitivity=2.0, rng=np.random.default_rng(0))


# ------------------------------------------------------------------------------------------------ statement, checks


def test_the_default_sampling_rate_is_public_and_no_number_reveals_the_private_count(tmp_path: Path,
                                                                                    lm_cache: Path) -> None:
    """Issue 36: without dpft.sampling_rate q was B/N and privacy.json held N (47) exactly, with q and σ that
    reveal it too. Now q is the public default 1/16 whatever N: two private corpora of 41 and 58 records give the
    same q, steps and σ, the statement lists no assumption about N, and the release scan finds no private count
    in any file outside private/."""
    from privtext.evaluate.release_scan import scan_release, summary
    from privtext.methods.dpft.method import DEFAULT_SAMPLING_RATE

    params = []
    for n, seed in ((41, 1), (58, 2)):
        priv, pub = corpora(n_private=n, seed=seed)
        cfg = make_config(tmp_path / f"n{n}", lm_cache, priv=priv, pub=pub, dpft={"epochs": 1})
        raw = cfg.dump()
        raw["dpft"].pop("sampling_rate")
        root = run_config(config_from_dict(raw))
        st = json.loads((root / "privacy.json").read_text())
        assert not st["assumed_public"], st["assumed_public"]
        assert not re.search(rf"(?<![\d.]){n}(?![\d.])", json.dumps(st))
        found = scan_release(root, min_count=10)
        assert not found, summary(found)
        (entry,) = [x for x in ledger_lines(root) if x["key"].startswith("dpsgd/")]
        assert entry["meta"]["sampling_rate"] == DEFAULT_SAMPLING_RATE and entry["meta"]["steps"] == 16
        params.append({k: st["parameters"][k] for k in ("sampling_rate", "steps_per_epoch", "steps",
                                                         "noise_multiplier")})
    assert params[0] == params[1] and params[0]["steps_per_epoch"] == 16


@pytest.mark.parametrize(("privacy", "dpft", "match"), [
    ({"mu": 1.0}, {}, "cannot account for Poisson-subsampled"),
    ({"secret": {"p": 1e-3, "r": 2e-2}}, {}, "cannot account for Poisson-subsampled"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"model": "/nonexistent/model"}, "no model folder"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"max_grad_norm": 0}, "max_grad_norm"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"nonsense": 1}, "nonsense"),
    # plain SGD's step scales with the normaliser: q given without batch_size would divide by the default 64
    ({"epsilon": 4.0, "delta": 1e-5}, {"optimizer": "sgd", "sampling_rate": 0.5}, "batch_size"),
    # issue 36: batch_size alone read as q = B/N, which makes N public; refused with the way to say it
    ({"epsilon": 4.0, "delta": 1e-5}, {"sampling_rate": None, "batch_size": 16}, "without dpft.sampling_rate"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"devices": []}, "devices is empty"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"devices": ["cpu", "gpu"]}, "'gpu' is not a device"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"devices": ["cpu", "cuda:0"]}, "mixes CPUs and GPUs"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"devices": ["cuda:0", "cuda"]}, "cuda:0 is listed twice"),
    ({"epsilon": 4.0, "delta": 1e-5}, {"devices": ["cpu", "cpu"], "device": "cuda"}, "give one of them"),
    pytest.param({"epsilon": 4.0, "delta": 1e-5}, {"devices": ["cuda:0", "cuda:1"]}, "CUDA is not available",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")),
])
def test_bad_configurations_are_refused_before_anything_is_written(privacy: dict[str, Any], dpft: dict[str, Any],
                                                                   match: str, tmp_path: Path,
                                                                   lm_cache: Path) -> None:
    from privtext.errors import BackendError

    with pytest.raises((ConfigError, BackendError), match=match):
        if dpft.get("sampling_rate", 0) is None:  # the option left out (not given as null)
            raw = make_config(tmp_path / "ok", lm_cache).dump()
            raw["dpft"] = {**{k: v for k, v in raw["dpft"].items() if k != "sampling_rate"},
                           **{k: v for k, v in dpft.items() if k != "sampling_rate"}}
            cfg = config_from_dict({**raw, "output": str(tmp_path / "bad")})
        else:
            cfg = make_config(tmp_path / "bad", lm_cache, privacy=privacy, dpft=dpft)
        run_config(cfg)
    assert not (tmp_path / "bad").exists()


def test_dpsgd_releases_refuse_relations_whose_sampling_they_do_not_account_for() -> None:
    from privtext.mechanisms.dpsgd import dpsgd_contribution

    for rel in (NeighbouringRelation.of("replace_one"), NeighbouringRelation(kind="secret_group", group_size=3)):
        with pytest.raises(PrivacyError, match="add/remove"):
            dpsgd_release("dpsgd/epoch_000", noise_multiplier=1.0, sampling_rate=0.1, steps=10,
                          contribution=dpsgd_contribution(1.0), relation=rel)


def test_subsampled_release_without_noise_is_non_private() -> None:
    assert epsilon_for_delta(dpsgd_event(0.0, 0.1, 5), 1e-5) == math.inf
    assert epsilon_for_delta(dpsgd_event(1.0, 0.1, 5), 1e-5) < math.inf


def test_a_run_builds_no_embedder(tmp_path: Path, lm_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dpft embeds nothing (no votes): the run must not load the embedder (MiniLM by default), so it runs where
    that model is absent, e.g. a GPU machine with only the fine-tuning stack."""
    import privtext.embed

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("dpft built an embedder")

    monkeypatch.setattr(privtext.embed, "build_embedder", refuse)
    root = run_config(make_config(tmp_path / "noemb", lm_cache, dpft={"epochs": 0}))
    assert sum(1 for _ in open(root / "synthetic.jsonl")) == 8


@pytest.mark.gpu
def test_a_gpu_run_trains_on_cuda(tmp_path: Path, lm_cache: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = run_config(make_config(tmp_path / "gpu", lm_cache, dpft={"device": "cuda", "epochs": 1}))
    assert json.loads((root / "privacy.json").read_text())["private"] is True
    assert "on cuda" in (root / "private" / "log.txt").read_text()


@pytest.mark.gpu
def test_two_gpus_reach_the_parameters_of_one(tmp_path: Path, lm_cache: Path) -> None:
    """``dpft.devices: [cuda:0, cuda:1]`` (NCCL): the same check as on two CPU processes."""
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    privacy = {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True}
    one = run_config(make_config(tmp_path / "one", lm_cache, privacy=privacy, dpft={"device": "cuda:0"}))
    two = run_config(make_config(tmp_path / "two", lm_cache, privacy=privacy,
                                 dpft={"devices": ["cuda:0", "cuda:1"]}))
    a, b = kept(one, "dpsgd/epoch_001"), kept(two, "dpsgd/epoch_001")
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-3, atol=1e-5, err_msg=k)


# ------------------------------------------------------------------------- the loss and the trainable label codes


def test_the_loss_counts_the_text_given_the_codes(lm_cache: Path) -> None:
    """``SequenceLoss`` with ``starts`` (``dpft.loss_on: text``) is each record's mean NLL over its text tokens and
    end only, cross-checked with the NLL taken here from the logits; without ``starts`` the codes count too, and
    the two differ."""
    from privtext.backends import parse_options
    from privtext.generate.lm import PAD, build_public_lm
    from privtext.generate.lm.backend import LMOptions
    from privtext.methods.dpft.models import SequenceLoss, prompt_length

    priv, pub = corpora()
    lo = parse_options(LMOptions, {**TINY_LM, "cache_dir": str(lm_cache)}, where="test")
    lm = build_public_lm(pub.texts, pub.labels, settings=lo.settings(), cache=lo.cache, cache_dir=lo.cache_dir,
                         device="cpu")
    model, enc = lm.model.eval(), lm.encoder
    labels = [{c: priv.labels[c][i] for c in ("category", "mood")} for i in range(3)]
    seqs = [enc.record(t, lab)[:48] for t, lab in zip(priv.texts[:3], labels, strict=True)]
    starts = [prompt_length(s, enc.free(enc.label_ids(lab)[0], None)) for s, lab in zip(seqs, labels, strict=True)]
    assert starts == [4] * 3  # <|bos|>, two codes, <|text|>
    idx = np.arange(3)
    with torch.no_grad():
        text_loss = float(SequenceLoss(seqs, PAD, starts).make(model, "cpu")(idx))
        all_loss = float(SequenceLoss(seqs, PAD).make(model, "cpu")(idx))
        mine, every = [], []
        for s, st in zip(seqs, starts, strict=True):
            logp = torch.log_softmax(model(input_ids=torch.tensor([s])).logits[0, :-1].float(), -1)
            nll = -logp[torch.arange(len(s) - 1), torch.tensor(s[1:])]
            mine.append(float(nll[st - 1:].mean()))  # targets s[st:], predicted from positions st-1 on
            every.append(float(nll.mean()))
    assert text_loss == pytest.approx(np.mean(mine), rel=1e-4)
    assert all_loss == pytest.approx(np.mean(every), rel=1e-4)
    assert abs(text_loss - all_loss) > 1e-3


def test_a_code_delta_gets_each_records_own_gradient_and_nothing_from_other_tokens() -> None:
    """Opacus' per-record gradients of the code deltas equal the gradients taken record by record without it; a
    record without a code gives exactly 0; with zero deltas the model's outputs are the base model's."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from privtext.methods.dpft.codedelta import attach_code_deltas

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                       bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                                       attn_pdrop=0.0))
    for p in model.parameters():
        p.requires_grad_(False)
    ids = torch.tensor([[1, 3, 9, 10, 11], [1, 4, 3, 12, 13], [1, 20, 21, 22, 23]])  # the last has no code
    before = model(input_ids=ids).logits
    wrapped = attach_code_deltas(model, [3, 4])
    assert torch.equal(model(input_ids=ids).logits, before)
    with torch.no_grad():
        wrapped.delta.weight.normal_()
    gs = opacus.GradSampleModule(model, loss_reduction="mean")
    out = gs(input_ids=ids).logits
    per = torch.nn.functional.cross_entropy(out[:, :-1].reshape(-1, 40), ids[:, 1:].reshape(-1),
                                            reduction="none").view(3, -1).mean(1)
    per.mean().backward()
    g = wrapped.delta.weight.grad_sample  # (records, codes, d): each record's own gradient (loss_reduction mean)
    assert g is not None and g.shape == (3, 2, 16)
    assert torch.count_nonzero(g[2]) == 0
    for i in range(2):
        wrapped.delta.weight.grad = None
        o = gs._module(input_ids=ids[i:i + 1]).logits
        torch.nn.functional.cross_entropy(o[0, :-1], ids[i, 1:]).backward()
        assert torch.allclose(g[i], wrapped.delta.weight.grad, atol=1e-6)
    assert torch.count_nonzero(g[0, 1]) == 0 and torch.count_nonzero(g[1, 1]) > 0  # record 0 has code 3 only


def test_declared_labels_bring_the_measured_note_labelled_public_text_none(tmp_path: Path, capsys,
                                                                          monkeypatch) -> None:
    """dpft learns the label conditioning from the private records alone when the public text has no labels
    (``data.label_values``); the pre-run check says so, with the corpus matrix's measurement (issue 35: a method
    that cannot use the private labels in a set-up refuses it or says so). Labelled public text brings no note."""
    from privtext.config import Config
    from privtext.methods import METHODS
    monkeypatch.delenv("PRIVTEXT_QUIET", raising=False)
    cls = METHODS.get("dpft")
    labelled = make_config(tmp_path / "a", tmp_path / "lm")
    cls.check_config(labelled, cls.parse_options(labelled))
    assert "note: with data.label_values" not in capsys.readouterr().err
    d = labelled.dump()
    d["data"]["label_values"] = {"category": ["a", "b"], "mood": ["x", "y"]}
    declared = Config.model_validate(d)
    cls.check_config(declared, cls.parse_options(declared))
    err = " ".join(capsys.readouterr().err.split())
    assert "learns which label goes with which text from the private records alone" in err
    assert "at chance" in err and "docs/corpus-matrix.md" in err
