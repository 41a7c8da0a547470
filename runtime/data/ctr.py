"""The ``ctr`` example dataset: Criteo-layout click records with labels from a planted teacher.

Layout (what the Criteo Kaggle/Terabyte data looks like once converted to tf.train.Example):
`I1`..`I13` int64 counts (heavy-tailed, >= 0), `C1`..`C26` 8-character lowercase hex strings
(one categorical value each), `label` int64 0/1, `id` int64 (the record's index).

Categorical values: column c has `CRITEO_CARDINALITIES[c] * vocab_scale` distinct values (at
least 2; the default scale gives about 340k values over the 26 columns, `vocab_scale=1` the real
Criteo sizes, about 34 million). A record's value of rank r (0 = most frequent) is drawn as
`floor(card ** u)` for a uniform u, i.e. Zipf with exponent 1 bounded to the column's
cardinality; its hex string is a fixed hash of (column, rank), the same for every seed.

Teacher: the click probability is `sigmoid(logit)` with
    logit = BIAS + sum_j W_j * z_j + sum_c a(c, r_c) + sum_{(c, d) in PAIRS} <v(c, r_c), v(d, r_d)>
where z_j = log1p(I_j) standardized, a(c, r) a per-value effect and v(c, r) a 4-dim latent
vector, both fixed hashes of (column, rank) -- so a model needs per-value embeddings (first
order) and factorized interactions (second order, what FM/DeepFM add) to reach it. The label is
a Bernoulli draw of that probability; the AUC of the probabilities themselves on the drawn
labels (`TeacherAUC`) is the best any model can reach on the data.

Every draw depends only on (seed, block of 1,024 records), so a record depends only on the seed
and its index, and generation streams block by block (memory-flat).
"""

from __future__ import annotations

import numpy as np

NUM_INT = 13
NUM_CAT = 26
INT_COLUMNS = tuple(f"I{i}" for i in range(1, NUM_INT + 1))
CAT_COLUMNS = tuple(f"C{i}" for i in range(1, NUM_CAT + 1))
# Distinct values per categorical column in the Criteo Kaggle display-advertising data.
CRITEO_CARDINALITIES = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip
DEFAULT_VOCAB_SCALE = 0.01
BIAS = -1.6
LATENT_DIM = 4
# Field pairs whose latent vectors interact in the teacher (0-based categorical columns).
PAIRS = ((0, 1), (2, 3), (4, 5), (6, 7), (9, 10), (12, 13), (0, 13), (3, 9))
_INT_MEAN = np.linspace(0.5, 3.0, NUM_INT)  # log-scale location of each count column
_INT_WEIGHTS = np.array([0.3, -0.2, 0.25, 0.0, -0.15, 0.2, 0.1, -0.1, 0.15, 0.0, 0.2, -0.25, 0.1])
_EFFECT_SCALE = 0.8  # spread of the per-value effects a(c, r)
_LATENT_SCALE = 0.6  # spread of each latent coordinate
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def cardinalities(vocab_scale: float = DEFAULT_VOCAB_SCALE) -> tuple[int, ...]:
    """Distinct values per categorical column at `vocab_scale` (each at least 2)."""
    if not vocab_scale > 0:
        raise ValueError(f"vocab_scale must be positive, got {vocab_scale}")
    return tuple(max(2, round(c * vocab_scale)) for c in CRITEO_CARDINALITIES)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a well-mixed uint64 hash of uint64 `x` (vectorised)."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x += np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _value_hash(column: int, rank: np.ndarray, salt: int) -> np.ndarray:
    key = (np.uint64(column) << np.uint64(48)) | rank.astype(np.uint64)
    return _mix(key ^ np.uint64(salt * 0x632BE59BD9B4E019 & 0xFFFFFFFFFFFFFFFF))


def _uniform(column: int, rank: np.ndarray, salt: int) -> np.ndarray:
    """A fixed uniform(-1, 1) per (column, rank, salt)."""
    bits = _value_hash(column, rank, salt) >> np.uint64(11)
    return bits.astype(np.float64) * (2.0 / 2.0**53) - 1.0


def hex_values(column: int, rank: np.ndarray) -> np.ndarray:
    """The 8-character hex strings (dtype S8) of ranks `rank` in categorical `column`."""
    h = (_value_hash(column, rank, salt=1) >> np.uint64(32)).astype(np.uint32)
    shifts = np.arange(28, -4, -4, dtype=np.uint32)
    digits = _HEX[(h[:, None] >> shifts) & np.uint32(0xF)]
    return np.ascontiguousarray(digits).view("S8").reshape(-1)


def block(
    rng: np.random.Generator, count: int, vocab_scale: float = DEFAULT_VOCAB_SCALE
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """`count` records as columns ([count, 1] arrays) and their teacher click probabilities."""
    cards = cardinalities(vocab_scale)
    cols: dict[str, np.ndarray] = {}
    logs = rng.normal(_INT_MEAN, 1.0, (count, NUM_INT))
    counts = np.floor(np.expm1(np.maximum(logs, 0.0))).astype(np.int64)
    for j, name in enumerate(INT_COLUMNS):
        cols[name] = counts[:, j : j + 1]
    z = (np.log1p(counts) - _INT_MEAN) / 1.2
    logit = BIAS + z @ _INT_WEIGHTS
    u = rng.random((count, NUM_CAT))
    latent = {}
    for c, name in enumerate(CAT_COLUMNS):
        card = cards[c]
        rank = np.minimum(np.floor(np.power(float(card), u[:, c])) - 1, card - 1)
        rank = rank.astype(np.uint64)
        cols[name] = hex_values(c, rank)[:, None]
        logit += _EFFECT_SCALE * _uniform(c, rank, salt=2)
        latent[c] = np.stack(
            [_LATENT_SCALE * _uniform(c, rank, salt=10 + k) for k in range(LATENT_DIM)], axis=1
        )
    for a, b in PAIRS:
        logit += np.sum(latent[a] * latent[b], axis=1) * 2.0
    probability = 1.0 / (1.0 + np.exp(-logit))
    cols["label"] = (rng.random(count) < probability).astype(np.int64)[:, None]
    return cols, probability


class TeacherAUC:
    """AUC of the teacher's probabilities on the drawn labels, in O(bins) memory.

    Probabilities are binned (2**16 bins over [0, 1]); ties within a bin count one half, so the
    value is exact to about 1e-4.
    """

    BINS = 1 << 16

    def __init__(self) -> None:
        self.positives = np.zeros(self.BINS, np.int64)
        self.negatives = np.zeros(self.BINS, np.int64)

    def update(self, probability: np.ndarray, labels: np.ndarray) -> None:
        bins = np.minimum((np.asarray(probability) * self.BINS).astype(np.int64), self.BINS - 1)
        labels = np.asarray(labels).reshape(-1).astype(bool)
        self.positives += np.bincount(bins[labels], minlength=self.BINS)
        self.negatives += np.bincount(bins[~labels], minlength=self.BINS)

    @property
    def click_rate(self) -> float:
        total = int(self.positives.sum() + self.negatives.sum())
        return float(self.positives.sum()) / total if total else 0.0

    def value(self) -> float:
        pos, neg = self.positives.astype(np.float64), self.negatives.astype(np.float64)
        if pos.sum() == 0 or neg.sum() == 0:
            return float("nan")
        below = np.concatenate([[0.0], np.cumsum(neg)[:-1]])  # negatives in lower bins
        return float(np.sum(pos * (below + 0.5 * neg)) / (pos.sum() * neg.sum()))
