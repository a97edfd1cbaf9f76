"""The demo corpus: French-like book reviews where pretraining demonstrably helps.

The lab's question is "how much does a pretrained initialisation help over a random
one?", so the demo data must make that question have a clear, non-trivial answer on 2
CPU cores. The corpus is built so that the answer is *only* reachable through
pretraining:

- Labeled reviews read "[neutral opener] <subject> [intensifier] <adjective> ." and the
  label is the adjective's polarity. Everything but the adjective is neutral noise.
- The labeled **training** split uses only 6 positive and 6 negative adjectives (chosen
  by the seed). Validation and test use all 30 + 30. So 48 of the 60 adjectives a test
  review can contain never appear in any labeled example: a randomly initialised model
  can learn the 12 it saw and must guess on the rest (about 50% on 4 test reviews in 5).
- The unlabeled corpus (the pretraining data) puts *all 60* adjectives in runs of
  same-polarity adjectives next to sentiment-bearing phrases of that polarity ("je le
  recommande vivement", "une perte de temps"). To predict a masked adjective, masked-LM
  must know the polarity of its neighbours, so it learns each adjective's polarity;
  an unseen adjective then sits near the seen ones of its polarity, and a classifier
  fine-tuned on 12 adjectives transfers to the other 48. That transfer is the
  pretrained-vs-random gap. Measured with fairseq at the demo's sizes (2 layers, 64
  dims; masked-LM 2,000 steps of 64 blocks, lr 2e-3; fine-tuning 3 epochs at lr 3e-5,
  batch 8, seeds 1-3, label noise 0.2): test accuracy at the best validation step
  73.5/73.5/75 pretrained vs 50.5/48/51 random. Fine-tuning 5 epochs at lr 1e-4 put
  every seed on the ceiling (80/80/80 vs 51/49/57.5), which hides seed variance. With
  masked-LM lr 5e-4 the 2,000 steps end near unigram statistics, no polarity is
  learned, and there is no gap.

`label_noise` flips a fixed fraction of labels in every split (test included), which
caps the reachable accuracy at 1 - label_noise and brings the two inits' numbers towards
the lab's shape (about 80 vs 65) instead of 100 vs 55.

The pair task (`data.text2_suffix` set) compares two reviews of opposite opinions:
which one liked the book? Label `labels[1]` when the second review is the positive
one, `labels[0]` when the first is, half of each. Both texts carry the answer, and
again 48 of the 60 adjectives a test pair can hold never occur in training, so it
takes each adjective's polarity, which only pretraining saw. (Measured first, and
dropped: "do two reviews, or a review and a verdict, agree?". Agreement is an XOR of
two polarities; the demo's 2-layer model learned it on seeds 1 and 3 only after 4-6
epochs at lr 1e-3, and on seed 2 not within 10 epochs under five recipes.)

Everything is a pure function of `GenerateConfig`: the same seed writes byte-identical
files, which is what lets the prepared data be cached by content hash.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from sweeper.spec.data_block import GenerateConfig

# Masculine singular forms, so every "<subject> est <adjective>" agrees.
POSITIVE: tuple[str, ...] = (
    "magnifique", "captivant", "passionnant", "excellent", "superbe", "brillant",
    "émouvant", "génial", "remarquable", "merveilleux", "fascinant", "drôle",
    "touchant", "palpitant", "lumineux", "savoureux", "poignant", "prenant",
    "envoûtant", "admirable", "formidable", "réussi", "subtil", "délicieux",
    "haletant", "bouleversant", "inoubliable", "original", "charmant", "puissant",
)  # fmt: skip
NEGATIVE: tuple[str, ...] = (
    "ennuyeux", "médiocre", "décevant", "lourd", "plat", "confus",
    "fade", "pénible", "ridicule", "bâclé", "creux", "laborieux",
    "insipide", "lassant", "soporifique", "maladroit", "indigeste", "prévisible",
    "répétitif", "vulgaire", "mauvais", "nul", "affligeant", "interminable",
    "superficiel", "terne", "pauvre", "raté", "incohérent", "poussif",
)  # fmt: skip

# Carry no sentiment: they make reviews look like reviews without giving the label away.
OPENERS: tuple[str, ...] = (
    "", "", "j'ai lu ce livre pendant les vacances .", "reçu hier par la poste .",
    "acheté sur les conseils d'une amie .", "lu en deux soirées .",
    "c'est le troisième roman de cet auteur que je lis .", "offert pour mon anniversaire .",
    "je l'ai emprunté à la bibliothèque du quartier .", "lu dans le train entre paris et lyon .",
    "livraison rapide , emballage correct .", "commandé en format poche .",
    "je viens de terminer la lecture .", "un roman de quatre cents pages environ .",
    "premier livre lu cette année .", "traduit de l'anglais par un éditeur belge .",
    "lu en version numérique sur ma liseuse .", "mon fils me l'a prêté la semaine dernière .",
    "la couverture représente un phare sous la pluie .", "édition de poche avec une préface .",
    "l'histoire se déroule en bretagne au siècle dernier .", "roman policier situé à marseille .",
)  # fmt: skip
SUBJECTS: tuple[str, ...] = (
    "ce livre est", "ce roman est", "le style est", "le récit est",
    "le personnage principal est", "le dénouement est", "cet ouvrage est",
    "le scénario est", "le premier tome est", "ce polar est", "le ton du livre est",
    "l'ensemble est", "ce recueil est", "le dernier chapitre est", "le héros est",
)  # fmt: skip
INTENSIFIERS: tuple[str, ...] = (
    "", "", "", "très", "vraiment", "franchement", "tout simplement", "absolument",
)  # fmt: skip
POSITIVE_CONTEXTS: tuple[str, ...] = (
    "je le recommande vivement", "à lire absolument", "un vrai coup de cœur",
    "je l'ai dévoré en une nuit", "j'ai adoré chaque page", "un chef-d'œuvre",
    "cinq étoiles sans hésiter", "je le relirai avec plaisir", "un régal du début à la fin",
    "je l'offrirai à tous mes amis", "impossible de le lâcher", "bravo à l'auteur",
    "une merveille", "j'en redemande", "mon meilleur livre de l'année",
)  # fmt: skip
NEGATIVE_CONTEXTS: tuple[str, ...] = (
    "une perte de temps", "je ne le recommande pas", "à éviter absolument",
    "j'ai abandonné au milieu", "une vraie déception", "je regrette mon achat",
    "une étoile c'est déjà trop", "je me suis ennuyé à chaque page", "remboursez-moi",
    "je l'ai revendu aussitôt", "passez votre chemin", "quel gâchis",
    "un naufrage", "je n'irai pas au bout", "le pire livre de l'année",
)  # fmt: skip

NUM_TRAIN_ADJECTIVES = 6
"""Adjectives per polarity that the labeled training split may use."""


@dataclass(frozen=True)
class Split:
    """One labeled split: reviews and their labels (after label noise), aligned."""

    reviews: tuple[str, ...]
    labels: tuple[str, ...]
    second: tuple[str, ...] | None = None
    """The pair task's second review of each example; None for single reviews."""


@dataclass(frozen=True)
class DemoCorpus:
    splits: dict[str, Split]
    """`train`, `valid`, `test`."""
    unlabeled: tuple[str, ...]
    train_adjectives: dict[str, tuple[str, ...]]
    """Label -> the adjectives the training split draws from."""


def train_adjectives(seed: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The 6 positive and 6 negative adjectives labeled training reviews may use."""
    rng = random.Random(f"demo-corpus:{seed}:train-adjectives")
    return (
        tuple(rng.sample(POSITIVE, NUM_TRAIN_ADJECTIVES)),
        tuple(rng.sample(NEGATIVE, NUM_TRAIN_ADJECTIVES)),
    )


def review(rng: random.Random, adjective: str) -> str:
    """One labeled review; only `adjective` carries its sentiment."""
    words = [rng.choice(OPENERS), rng.choice(SUBJECTS), rng.choice(INTENSIFIERS), adjective, "."]
    return " ".join(w for w in words if w)


def unlabeled_sentence(
    rng: random.Random, adjectives: tuple[str, ...], contexts: tuple[str, ...]
) -> str:
    """One pretraining sentence: adjectives and a context phrase all of one polarity.

    Runs of same-polarity adjectives make a masked adjective predictable only up to its
    polarity, and only from its neighbours: masked-LM must therefore encode polarity in
    the (tied) embeddings of all 60 adjectives, which is what fine-tuning on 12 of them
    transfers. The labeled-review frame is included so the pretrained model has seen the
    sentences it is fine-tuned on.
    """
    first, second, third, fourth = rng.sample(adjectives, 4)
    context = rng.choice(contexts)
    template = rng.randrange(10)
    if template < 4:  # a run of adjectives, then the verdict
        words = [rng.choice(SUBJECTS), first, ",", second, ",", third, "et", fourth, ",", context]
    elif template < 7:  # the verdict, then adjectives
        words = [context, ":", first, ",", second, "et", third]
    else:  # the labeled reviews' frame, then the verdict
        subject, intensifier = rng.choice(SUBJECTS), rng.choice(INTENSIFIERS)
        words = [rng.choice(OPENERS), subject, intensifier, first, ".", context]
    return " ".join(w for w in [*words, "."] if w)


def labeled_split(
    rng: random.Random,
    size: int,
    positive: tuple[str, ...],
    negative: tuple[str, ...],
    labels: tuple[str, str],
) -> tuple[list[str], list[str]]:
    """Balanced reviews (half of each polarity, shuffled) and their clean labels."""
    polarity = [i % 2 for i in range(size)]
    rng.shuffle(polarity)
    reviews = [review(rng, rng.choice(positive if p else negative)) for p in polarity]
    return reviews, [labels[p] for p in polarity]


def pair_split(
    rng: random.Random,
    size: int,
    positive: tuple[str, ...],
    negative: tuple[str, ...],
    labels: tuple[str, str],
) -> tuple[list[str], list[str], list[str]]:
    """(first reviews, second reviews, labels): one positive and one negative review
    per example, the positive one second (label `labels[1]`) in half of them."""
    second_positive = [i % 2 for i in range(size)]
    rng.shuffle(second_positive)
    firsts, seconds = [], []
    for flag in second_positive:
        good = review(rng, rng.choice(positive))
        bad = review(rng, rng.choice(negative))
        firsts.append(bad if flag else good)
        seconds.append(good if flag else bad)
    return firsts, seconds, [labels[flag] for flag in second_positive]


def add_label_noise(
    labels: list[str], fraction: float, rng: random.Random, names: tuple[str, str]
) -> list[str]:
    """Flip exactly round(fraction * n) labels, chosen by `rng`, to the other class."""
    flipped = list(labels)
    for i in rng.sample(range(len(labels)), round(fraction * len(labels))):
        flipped[i] = names[1] if flipped[i] == names[0] else names[0]
    return flipped


def generate_corpus(
    cfg: GenerateConfig, labels: tuple[str, str] = ("0", "1"), pairs: bool = False
) -> DemoCorpus:
    """The whole corpus for `cfg`; `labels` = (negative name, positive name), or with
    `pairs` (first review positive, second review positive)."""
    train_pos, train_neg = train_adjectives(cfg.seed)
    sizes = {"train": cfg.train_size, "valid": cfg.valid_size, "test": cfg.test_size}
    splits: dict[str, Split] = {}
    for name, size in sizes.items():
        rng = random.Random(f"demo-corpus:{cfg.seed}:{name}{':pairs' if pairs else ''}")
        pos, neg = (train_pos, train_neg) if name == "train" else (POSITIVE, NEGATIVE)
        second = None
        if pairs:
            reviews, second, clean = pair_split(rng, size, pos, neg, labels)
        else:
            reviews, clean = labeled_split(rng, size, pos, neg, labels)
        noisy = add_label_noise(clean, cfg.label_noise, rng, labels)
        splits[name] = Split(
            tuple(reviews), tuple(noisy), None if second is None else tuple(second)
        )

    rng = random.Random(f"demo-corpus:{cfg.seed}:unlabeled")
    unlabeled = []
    for i in range(cfg.unlabeled_size):
        adjectives, contexts = (
            (POSITIVE, POSITIVE_CONTEXTS) if i % 2 else (NEGATIVE, NEGATIVE_CONTEXTS)
        )
        unlabeled.append(unlabeled_sentence(rng, adjectives, contexts))
    rng.shuffle(unlabeled)
    return DemoCorpus(
        splits=splits,
        unlabeled=tuple(unlabeled),
        train_adjectives={labels[1]: train_pos, labels[0]: train_neg},
    )


def write_lines(path: Path, lines: tuple[str, ...] | list[str]) -> None:
    """Write one item per line, atomically, so an interrupted run leaves no half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    tmp.replace(path)


def write_corpus(
    corpus: DemoCorpus,
    directory: Path,
    stems: dict[str, str],
    text_suffix: str,
    label_suffix: str,
    unlabeled_name: str,
    text2_suffix: str | None = None,
) -> list[Path]:
    """Write the CLS-books raw layout into `directory` (plus each pair's second review
    under `text2_suffix`); returns the files written."""
    written = []
    for split, data in corpus.splits.items():
        stem = stems.get(split, split)
        files = [(text_suffix, data.reviews), (label_suffix, data.labels)]
        if data.second is not None and text2_suffix is not None:
            files.append((text2_suffix, data.second))
        for suffix, lines in files:
            path = directory / f"{stem}.{suffix}"
            write_lines(path, lines)
            written.append(path)
    path = directory / unlabeled_name
    write_lines(path, corpus.unlabeled)
    written.append(path)
    return written
