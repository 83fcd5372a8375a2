"""String-kernel learners on text streams, next to river's bag-of-words pipelines.

Streams
-------
``motif``: deterministic DNA-like reads (alphabet ``acgt``, length 60-100). A positive
read carries one of three planted 12-base motifs, each copy with every base substituted
with probability 0.12 and one insertion or deletion with probability 0.3; a negative read
is background, half of them with a *decoy* (a motif with its halves swapped, so it has
almost the same k-mers but not the motif's order). Seeded: the same events every run.

A real corpus: none ships bundled in an installed package here (river's ``SMSSpam`` and
``TREC07`` are downloaded on first use, and nothing may be downloaded), so the run says
so instead of inventing one.

Models (all test-then-train, one event at a time, budget 500 for the kernel learners)
-------------------------------------------------------------------------------------
streamk ``KernelPerceptron`` with ``Normalized(Spectrum(k))`` (k = 4, 6),
``Normalized(Mismatch(6, 1))`` and ``Normalized(RestrictedGapWeighted(4, 1, 0.5))``, and
``MarginPerceptron(margin=0.5)`` and ``KernelAdatron`` (defaults: C = inf, one resweep)
with ``Normalized(Spectrum(6))``, all with
``RemoveOldest(500)``; river ``BagOfWords`` and ``TFIDF`` with a k-mer tokenizer (k = 4
and 6: the spectrum kernels' features) into ``LogisticRegression``, and ``BagOfWords``
into ``MultinomialNB``.

Also measured: the cost of one prediction with the Remark 11.55 weight map against the
dual expansion ``K(s, S) @ coef`` (with ``K(s, S)`` gathered from the support's leaf rows,
and from ``kernel.gram``) at support sizes 100 and 2,000 (``Spectrum(4)``).

Run::

    python -m benchmarks.text            # 6,000 events, 3 repeats of the timing
    python -m benchmarks.text --quick    # 1,500 events, 1 repeat

Writes ``benchmarks/results/text.json`` (``text-quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from river import compose, feature_extraction, linear_model, naive_bayes

from benchmarks.common import machine_info
from streamk import (
    KernelAdatron,
    KernelPerceptron,
    MarginPerceptron,
    Mismatch,
    Normalized,
    RestrictedGapWeighted,
    Spectrum,
)
from streamk.budget import RemoveOldest
from streamk.learners.objects import ObjectSupportSet

RESULTS = Path(__file__).parent / "results"
MOTIFS = ("gattacagcatc", "ccgtaatgcgta", "tgcatgcaagtc")


def _mutate(motif: str, rng: random.Random) -> str:
    bases = [rng.choice("acgt") if rng.random() < 0.12 else b for b in motif]
    if rng.random() < 0.3:
        at = rng.randrange(len(bases))
        if rng.random() < 0.5:
            del bases[at]
        else:
            bases.insert(at, rng.choice("acgt"))
    return "".join(bases)


def motif_stream(n: int, seed: int = 17) -> list[tuple[str, bool]]:
    """The ``motif`` stream (module docstring): ``n`` (read, label) pairs, seeded."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(60, 100)
        read = "".join(rng.choice("acgt") for _ in range(length))
        y = rng.random() < 0.5
        if y:
            insert = _mutate(rng.choice(MOTIFS), rng)
        elif rng.random() < 0.5:
            m = rng.choice(MOTIFS)
            insert = _mutate(m[6:] + m[:6], rng)  # decoy: the same k-mers, mostly
        else:
            insert = ""
        at = rng.randrange(length - len(insert) + 1)
        out.append((read[:at] + insert + read[at + len(insert) :], y))
    return out


def kmers(k: int) -> Callable[[str], list[str]]:
    def tokenize(s: str) -> list[str]:
        return [s[i : i + k] for i in range(len(s) - k + 1)]

    return tokenize


def models(budget: int) -> dict[str, Callable[[], Any]]:
    """Name -> factory; streamk models take the string, river's a one-entry dict."""

    def kp(kernel, cls=KernelPerceptron, **kw):
        return lambda: cls(kernel=kernel, budget=RemoveOldest(budget), **kw)

    def river(features, k, model):
        return lambda: compose.Pipeline(
            features(on="text", tokenizer=kmers(k), lowercase=False), model()
        )

    bow, tfidf = feature_extraction.BagOfWords, feature_extraction.TFIDF
    lr, nb = linear_model.LogisticRegression, naive_bayes.MultinomialNB
    return {
        "streamk KP Normalized(Spectrum(4))": kp(Normalized(Spectrum(4))),
        "streamk KP Normalized(Spectrum(6))": kp(Normalized(Spectrum(6))),
        "streamk MarginPerceptron(0.5) Normalized(Spectrum(6))": kp(
            Normalized(Spectrum(6)), MarginPerceptron, margin=0.5
        ),
        "streamk KernelAdatron Normalized(Spectrum(6))": kp(Normalized(Spectrum(6)), KernelAdatron),
        "streamk KP Normalized(Mismatch(6,1))": kp(Normalized(Mismatch(6, 1, "acgt"))),
        "streamk KP Normalized(RestrictedGapWeighted(4,1,0.5))": kp(
            Normalized(RestrictedGapWeighted(4, 1, 0.5))
        ),
        "river BagOfWords(4-mers) | LogisticRegression": river(bow, 4, lr),
        "river BagOfWords(6-mers) | LogisticRegression": river(bow, 6, lr),
        "river TFIDF(4-mers) | LogisticRegression": river(tfidf, 4, lr),
        "river TFIDF(6-mers) | LogisticRegression": river(tfidf, 6, lr),
        "river BagOfWords(4-mers) | MultinomialNB": river(bow, 4, nb),
        "river BagOfWords(6-mers) | MultinomialNB": river(bow, 6, nb),
    }


def prequential(model: Any, stream: list[tuple[str, bool]], as_dict: bool) -> dict[str, float]:
    """Predict, then learn, one event at a time: accuracy and events/s."""
    hits = 0
    start = time.perf_counter()
    for s, y in stream:
        x = {"text": s} if as_dict else s
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
    seconds = time.perf_counter() - start
    return {"accuracy": hits / len(stream), "events_per_s": len(stream) / seconds}


def prediction_cost(sizes: tuple[int, ...], probes: int, repeats: int) -> list[dict[str, Any]]:
    """Microseconds per prediction with the weight map vs the dual expansion (Remark 11.55).

    Every timed prediction is of a string not seen before (fresh probes per size, method
    and repeat), so both include building the query's leaf map, as in a stream.
    """
    rng = random.Random(5)

    def read() -> str:
        return "".join(rng.choice("acgt") for _ in range(80))

    out = []
    for n in sizes:
        S = ObjectSupportSet(Spectrum(4))
        for i in range(n):
            S.append(read(), np.array([1.0 if i % 2 else -1.0]))
        S.dual_decision([read()])  # the support strings' leaf maps are cached from here on
        row: dict[str, Any] = {"support": n, "leaves_in_map": S._primal.n_leaves}
        methods = (
            ("primal_us", S.decision_one),  # Remark 11.55's weight map
            ("gather_us", lambda q, S=S: S.kernel_row(q) @ S.coef),  # K(q, S) from leaf rows
            ("dual_us", lambda q, S=S: S.dual_decision([q])),  # K(q, S) from kernel.gram
        )
        for name, f in methods:
            times = []
            for _ in range(repeats):
                queries = [read() for _ in range(probes)]
                t0 = time.perf_counter()
                for q in queries:
                    f(q)
                times.append((time.perf_counter() - t0) / probes * 1e6)
            row[name] = statistics.median(times)
        queries = [read() for _ in range(50)]
        row["max_abs_difference"] = max(
            abs(float(S.decision_one(q)[0]) - float(S.dual_decision([q])[0, 0])) for q in queries
        )
        out.append(row)
    return out


def _rows(results: dict[str, dict[str, float]]) -> Iterator[str]:
    width = max(map(len, results))
    yield f"{'model':<{width}}  accuracy  events/s"
    for name, r in results.items():
        yield f"{name:<{width}}  {r['accuracy']:8.4f}  {r['events_per_s']:8.0f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,500 events, one repeat")
    args = parser.parse_args(argv)
    n, repeats = (1_500, 1) if args.quick else (6_000, 3)
    budget = 500
    stream = motif_stream(n)
    results: dict[str, dict[str, float]] = {}
    for name, make in models(budget).items():
        runs = [
            prequential(make(), stream, as_dict=name.startswith("river")) for _ in range(repeats)
        ]
        speeds = [r["events_per_s"] for r in runs]
        results[name] = {
            "accuracy": runs[0]["accuracy"],  # deterministic: the same every repeat
            "events_per_s": statistics.median(speeds),
            "events_per_s_min": min(speeds),
            "events_per_s_max": max(speeds),
        }
        print(f"  {name}: {results[name]['accuracy']:.4f}, {results[name]['events_per_s']:.0f}/s")
    cost = prediction_cost((100, 2_000), probes=300, repeats=repeats)
    report = {
        "stream": {
            "name": "motif",
            "events": n,
            "seed": 17,
            "positives": sum(y for _, y in stream),
        },
        "budget": budget,
        "repeats": repeats,
        "results": results,
        "real_corpus": "none bundled in an installed package (river's SMSSpam/TREC07 download)",
        "prediction_cost_spectrum4": cost,
        "machine": machine_info(),
    }
    print("\n".join(_rows(results)))
    for row in cost:
        print(
            f"support {row['support']:>5}: weight map {row['primal_us']:7.1f} us, "
            f"leaf-row gather {row['gather_us']:7.1f} us, "
            f"kernel.gram {row['dual_us']:8.1f} us per prediction "
            f"(|diff| <= {row['max_abs_difference']:.1e})"
        )
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / ("text-quick.json" if args.quick else "text.json")
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {path}")
    return report


if __name__ == "__main__":
    main()
