"""Corpora of different shapes, written as a user would hand them to privtext (issue 35's corpus matrix).

Every builder writes ``private.csv`` (the private corpus), ``public.csv`` (public text), ``real.csv`` (held-out
real records for evaluation, never in the private file) under ``artifacts/corpora/<name>/`` and returns the
folder. They read ``../shared/data`` (or ``$PRIVTEXT_SHARED_DATA``) and are seeded, so a rerun writes the same
files.

* ``tickets`` — the support-ticket set-up of issue 35: 2000 customer-support messages of 10 Banking77 intents in
  columns ``ticket_id, message, intent, channel`` (``channel`` a public-looking nuisance column); 4000 *unlabelled*
  messages of the other 67 intents as public text (column ``message``); the remaining messages of the 10 intents as
  ``real.csv``. One private ticket is the two words "pending transaction?", a phrase three public messages hold.
* ``tickets-labelled`` — 1400 private tickets of the same intents; public text = 600 messages of the *same* 10
  intents (disjoint from the private and real rows) with their ``intent`` column.
* ``yelp`` — 2000 private Yelp reviews (``text, label1, label2``), 3000 labelled public reviews, 500 real.
* ``pubmed`` — 1000 private PubMed abstracts (``text``, no labels), 3000 public abstracts, 300 real.
* ``clinic`` — the demo's clinic notes with planted secrets (``privtext.demo.make_demo_corpora``), with the
  declared secret lists (``patient_names.txt``, ``record_numbers.txt``).

    python benchmarks/corpora.py                 # writes every corpus, prints its shape
    python benchmarks/corpora.py tickets         # one
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from harness import ROOT, SHARED, read_rows, use_src, write_rows

OUT = ROOT / "artifacts" / "corpora"

#: the ten private intents of the support-ticket set-up (pending_card_payment holds "pending transaction?")
TICKET_INTENTS = ("pending_card_payment", "card_payment_fee_charged", "direct_debit_payment_not_recognised",
                  "balance_not_updated_after_cheque_or_cash_deposit", "wrong_amount_of_cash_received",
                  "cash_withdrawal_charge", "transaction_charged_twice", "declined_cash_withdrawal",
                  "transfer_fee_charged", "request_refund")


def _norm(t: str) -> str:
    import re

    return " ".join(re.findall(r"\w+", t.lower()))


def tickets(out: Path = OUT, *, n_private: int = 2000, n_public: int = 4000, seed: int = 0,
            labelled_public: int = 0) -> Path:
    """The support-ticket set-up (module docstring), in ``out/tickets``. With ``labelled_public`` > 0 (the
    ``tickets-labelled`` corpus, in ``out/tickets-labelled``) the public text is that many labelled messages of the
    same 10 intents instead, taken from the rows the private file does not hold."""
    src = SHARED / "banking77"
    rows = read_rows(src / "train.csv") + read_rows(src / "test.csv")
    rng = np.random.default_rng(seed)
    ours = [r for r in rows if r["category"] in TICKET_INTENTS]
    other = [r for r in rows if r["category"] not in TICKET_INTENTS]
    perm = rng.permutation(len(ours))
    # "pending transaction?" goes into the private file (issue 35's false alarm), the rest as drawn
    pinned = [i for i in perm if _norm(ours[i]["text"]) == "pending transaction"]
    order = pinned + [i for i in perm if i not in pinned]
    private_idx, rest = order[:n_private], order[n_private:]
    channels = ("email", "chat", "phone", "app")
    private = [{"ticket_id": f"T{100000 + k}", "message": ours[i]["text"], "intent": ours[i]["category"],
                "channel": channels[int(rng.integers(len(channels)))]} for k, i in enumerate(private_idx)]
    private_norm = {_norm(r["message"]) for r in private}
    held = [{"message": ours[i]["text"], "intent": ours[i]["category"]} for i in rest
            if _norm(ours[i]["text"]) not in private_norm]
    if labelled_public:
        d = out / "tickets-labelled"
        public, real = held[:labelled_public], held[labelled_public:]
        write_rows(d / "public.csv", public, ["message", "intent"])
    else:
        d = out / "tickets"
        real = held
        pub = [other[i] for i in rng.permutation(len(other))[:n_public]]
        write_rows(d / "public.csv", [{"message": r["text"]} for r in pub], ["message"])
    write_rows(d / "private.csv", private, ["ticket_id", "message", "intent", "channel"])
    write_rows(d / "real.csv", real, ["message", "intent"])
    return d


def tickets_labelled(out: Path = OUT, *, seed: int = 0) -> Path:
    """1400 private tickets; 600 labelled public messages of the same intents; the rest real."""
    return tickets(out, n_private=1400, seed=seed, labelled_public=600)


def yelp(out: Path = OUT, *, n_private: int = 2000, n_public: int = 3000, n_real: int = 500, seed: int = 0) -> Path:
    src = SHARED / "yelp"
    rng = np.random.default_rng(seed)
    dev, test = read_rows(src / "dev.csv"), read_rows(src / "test.csv")
    private = [dev[i] for i in np.sort(rng.permutation(len(dev))[:n_private])]
    perm = rng.permutation(len(test))
    public = [test[i] for i in np.sort(perm[:n_public])]
    real = [test[i] for i in np.sort(perm[n_public:n_public + n_real])]
    d = out / "yelp"
    for name, rows in (("private", private), ("public", public), ("real", real)):
        write_rows(d / f"{name}.csv", rows, ["text", "label1", "label2"])
    return d


def pubmed(out: Path = OUT, *, n_private: int = 1000, n_public: int = 3000, n_real: int = 300, seed: int = 0) -> Path:
    src = SHARED / "pubmed"
    rng = np.random.default_rng(seed)
    dev, test = read_rows(src / "dev.csv"), read_rows(src / "test.csv")
    private = [dev[i] for i in np.sort(rng.permutation(len(dev))[:n_private])]
    perm = rng.permutation(len(test))
    d = out / "pubmed"
    write_rows(d / "private.csv", private, ["text"])
    write_rows(d / "public.csv", [test[i] for i in np.sort(perm[:n_public])], ["text"])
    write_rows(d / "real.csv", [test[i] for i in np.sort(perm[n_public:n_public + n_real])], ["text"])
    return d


def clinic(out: Path = OUT, *, seed: int = 0) -> Path:
    use_src()
    from privtext.data import write_corpus
    from privtext.demo import make_demo_corpora, make_heldout, write_demo_files

    private, public, patients = make_demo_corpora(seed=seed)
    d = out / "clinic"
    d.mkdir(parents=True, exist_ok=True)
    write_demo_files(d, private, public, patients)  # private.csv, public.csv and the declared secret lists
    write_corpus(make_heldout(), d / "real.csv", include_ids=False)
    return d


BUILDERS = {"tickets": tickets, "tickets-labelled": tickets_labelled, "yelp": yelp, "pubmed": pubmed, "clinic": clinic}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help=f"some of {sorted(BUILDERS)} (default: all)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    for name in args.names or list(BUILDERS):
        d = BUILDERS[name](args.out)
        sizes = {f.stem: len(read_rows(f)) for f in sorted(d.glob("*.csv"))}
        print(f"{name}: {d} {sizes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
