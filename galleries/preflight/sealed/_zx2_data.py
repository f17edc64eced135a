"""Sealed gallery ZX's data (half ``zx2``): small seeded synthetic sets (coloured shapes and their grey
versions, digits under a sensor's stain for domain adaptation, logged transitions of a gridworld, shoppers'
basket histories, points with input-dependent label noise, bracket strings) and scikit-learn's digits. Every
builder is deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, each read as a tuple (``transform(*row)`` when a transform is given)."""

    def __init__(self, *columns: torch.Tensor, transform=None) -> None:
        self.columns, self.transform = columns, transform

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i: int):
        row = tuple(column[i] for column in self.columns)
        return self.transform(*row) if self.transform else row


# --- image colourisation: coloured shapes on a grey background ----------------------------------------------
SIDE = 16
LUMA = torch.tensor([0.299, 0.587, 0.114])  # Rec. 601 luminance weights, R, G, B
HUES = torch.tensor(
    [[1.0, 0.15, 0.1], [0.15, 0.8, 0.2], [0.1, 0.25, 1.0]]
)  # disc red, square green, cross blue


@cache
def shapes(n: int, seed: int) -> torch.Tensor:
    """``n`` RGB images (3, 16, 16) in [0, 1]: a smooth grey background and three shapes whose look tells
    their hue (solid discs are red, squares striped across green, crosses in a checkerboard blue), each of
    a random size, place and brightness; painted in turn, later ones over earlier ones."""
    g = _gen(seed)
    background = 0.2 + 0.3 * F.interpolate(torch.rand(n, 1, 3, 3, generator=g), size=SIDE, mode="bilinear")
    image = background.repeat(1, 3, 1, 1)
    ys, xs = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(), indexing="ij")
    stripes = 0.55 + 0.45 * (ys % 2)
    checker = 0.55 + 0.45 * ((ys + xs) % 2)
    for _ in range(3):
        kind = torch.randint(3, (n,), generator=g)
        centre = 3 + 10 * torch.rand(n, 2, generator=g)
        size = 2.0 + 2.0 * torch.rand(n, generator=g)
        dy = (ys - centre[:, 0, None, None]).abs()
        dx = (xs - centre[:, 1, None, None]).abs()
        s = size[:, None, None]
        disc = dy**2 + dx**2 < s**2
        square = (dy < 0.8 * s) & (dx < 0.8 * s)
        cross = ((dy < 0.5 * s) & (dx < 1.2 * s)) | ((dx < 0.5 * s) & (dy < 1.2 * s))
        inside = torch.stack([disc, square, cross], 1)[torch.arange(n), kind]  # (n, 16, 16)
        shade = torch.stack([torch.ones(SIDE, SIDE), stripes, checker])[kind]  # (n, 16, 16)
        colour = HUES[kind] * (0.7 + 0.3 * torch.rand(n, 1, generator=g))  # (n, 3)
        image = torch.where(inside[:, None], colour[:, :, None, None] * shade[:, None], image)
    return image


def luma(rgb: torch.Tensor) -> torch.Tensor:
    """The grey version (1, H, W) of an RGB image (3, H, W): Rec. 601 luminance."""
    return torch.einsum("c,...chw->...hw", LUMA, rgb).unsqueeze(-3)


def luma_bgr(rgb: torch.Tensor) -> torch.Tensor:
    """The luminance weights applied in BGR order (the convention of an OpenCV loader) to an RGB image."""
    return torch.einsum("c,...chw->...hw", LUMA.flip(0), rgb).unsqueeze(-3)


def grey_pair(rgb: torch.Tensor, grey=luma) -> tuple[torch.Tensor, torch.Tensor]:
    """(the grey version, the colour image)."""
    return grey(rgb), rgb


def turned_grey_pair(rgb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Heavy augmentation, all of it on the colour image before the grey version is made from it: a random
    mirror, quarter turn and overall brightness (x0.7 .. x1.1, clipped)."""
    if torch.rand(()) < 0.5:
        rgb = rgb.flip(-1)
    rgb = rgb.rot90(int(torch.randint(4, ())), (-2, -1))
    rgb = (rgb * (0.7 + 0.4 * torch.rand(()))).clamp(0, 1)
    return luma(rgb), rgb


def grey_pairs(n: int, seed: int, grey=luma) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed (grey, colour) pairs of ``n`` images."""
    rgb = shapes(n, seed)
    return grey(rgb), rgb


# --- unsupervised domain adaptation: digits, and digits through a stained sensor ----------------------------
def stained(x: torch.Tensor, seed: int) -> torch.Tensor:
    """The target domain: digits (n, 64) seen through a sensor with a smooth stain (one fixed pattern, of a
    strength drawn per image, 0.5 .. 1.5) added to every pixel."""
    stain = F.interpolate(torch.rand(1, 1, 3, 3, generator=_gen(100)), size=8, mode="bilinear").view(1, 64)
    strength = 0.5 + torch.rand(len(x), 1, generator=_gen(seed))
    return x + strength * stain


def target_digits(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A part of the digits in the target domain, and their classes."""
    x, y = digits(part)
    return stained(x, seed), y


class SourceAndTarget(Dataset):
    """Labelled source rows, each read with an unlabelled target row drawn at random: (x_s, y_s, x_t)."""

    def __init__(self, source: torch.Tensor, label: torch.Tensor, target: torch.Tensor) -> None:
        self.source, self.label, self.target = source, label, target

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i: int):
        return self.source[i], self.label[i], self.target[int(torch.randint(len(self.target), ()))]


# --- value learning on a gridworld (logged transitions) -----------------------------------------------------
ROWS = COLS = 6
STATES, ACTIONS = ROWS * COLS, 4
GOAL = COLS - 1  # the top-right cell: entering it ends the episode
WALLS = frozenset({(0, 3), (1, 3), (2, 3), (3, 3), (3, 1), (4, 1)})
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # up, right, down, left
SLIP, GAMMA, STEP_COST = 0.1, 0.9, -1.0


def _move(s: int, a: int) -> int:
    r, c = divmod(s, COLS)
    nr, nc = r + MOVES[a][0], c + MOVES[a][1]
    if not (0 <= nr < ROWS and 0 <= nc < COLS) or (nr, nc) in WALLS:
        return s
    return nr * COLS + nc


OPEN = [s for s in range(STATES) if divmod(s, COLS) not in WALLS and s != GOAL]  # where an agent can stand


def dynamics() -> torch.Tensor:
    """P[s, a, s']: the intended move with probability 0.9, a uniformly random one otherwise (walls and
    edges block)."""
    p = torch.zeros(STATES, ACTIONS, STATES)
    for s in range(STATES):
        for a in range(ACTIONS):
            p[s, a, _move(s, a)] += 1 - SLIP
            for b in range(ACTIONS):
                p[s, a, _move(s, b)] += SLIP / ACTIONS
    return p


def optimal_q() -> torch.Tensor:
    """Q*(s, a) by value iteration (every step costs 1; the goal is absorbing and worth 0)."""
    p = dynamics()
    q = torch.zeros(STATES, ACTIONS)
    for _ in range(500):
        v = q.max(-1).values
        v[GOAL] = 0.0
        q = STEP_COST + GAMMA * p @ v
    return q


def policy_value(policy: torch.Tensor) -> torch.Tensor:
    """V of a deterministic policy (an action per state), exactly (a linear solve)."""
    p = dynamics()[torch.arange(STATES), policy]  # (S, S)
    p[GOAL] = 0.0
    reward = torch.full((STATES,), STEP_COST)
    reward[GOAL] = 0.0
    return torch.linalg.solve(torch.eye(STATES) - GAMMA * p, reward)


def _step(s: int, a: int, g: torch.Generator) -> int:
    if float(torch.rand((), generator=g)) < SLIP:
        a = int(torch.randint(ACTIONS, (), generator=g))
    return _move(s, a)


@cache
def episodes(n: int, seed: int, horizon: int = 12) -> tuple[torch.Tensor, ...]:
    """``n`` transitions logged by a uniformly random behaviour policy in episodes of at most ``horizon``
    steps from random open cells, in the order they happened: (state, action, reward, next state, done)."""
    g = _gen(seed)
    rows: list[tuple[int, int, float, int, float]] = []
    while len(rows) < n:
        s = OPEN[int(torch.randint(len(OPEN), (), generator=g))]
        for _ in range(horizon):
            a = int(torch.randint(ACTIONS, (), generator=g))
            nxt = _step(s, a, g)
            done = nxt == GOAL
            rows.append((s, a, STEP_COST, nxt, float(done)))
            if done:
                break
            s = nxt
    s, a, r, nxt, done = zip(*rows[:n], strict=True)
    return torch.tensor(s), torch.tensor(a), torch.tensor(r), torch.tensor(nxt), torch.tensor(done)


def transitions(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """The logged transitions, shuffled (the rows keep their next states)."""
    columns = episodes(n, seed)
    order = torch.randperm(n, generator=_gen(seed + 50))
    return tuple(column[order] for column in columns)


def transitions_next_from_shifted_log(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """The logged transitions with the next state read as the following row's state (right in the episode
    log as it happened, but the log is shuffled first)."""
    s, a, r, _, done = transitions(n, seed)
    return s, a, r, s.roll(-1), done


# --- next-basket prediction ---------------------------------------------------------------------------------
ITEMS, CATEGORIES, HISTORY = 40, 8, 8
NEXT_ITEM = torch.randperm(ITEMS, generator=_gen(200))  # the item often bought the time after an item


def _basket(
    prev: torch.Tensor, staples: torch.Tensor, taste: torch.Tensor, g: torch.Generator
) -> torch.Tensor:
    basket = torch.zeros(ITEMS)
    basket[staples[torch.rand(len(staples), generator=g) < 0.7]] = 1.0
    follow = NEXT_ITEM[prev.nonzero()[:, 0]]
    basket[follow[torch.rand(len(follow), generator=g) < 0.6]] = 1.0
    for _ in range(1 + int(torch.randint(2, (), generator=g))):
        category = int(torch.multinomial(taste, 1, generator=g))
        basket[
            category * (ITEMS // CATEGORIES) + int(torch.randint(ITEMS // CATEGORIES, (), generator=g))
        ] = 1.0
    return basket


@cache
def shoppers(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` shoppers' histories of 3..8 baskets of 40 items (multi-hot; each basket: the shopper's two
    staples, each with probability 0.7; the item that follows each item of the previous basket, with
    probability 0.6; one or two items of the shopper's favourite categories), oldest first, left-padded with
    empty baskets to (8, 40); and the basket that came after the history (40,)."""
    g = _gen(seed)
    history, after = torch.zeros(n, HISTORY, ITEMS), torch.zeros(n, ITEMS)
    for i in range(n):
        length = 3 + int(torch.randint(HISTORY - 2, (), generator=g))
        staples = torch.randperm(ITEMS, generator=g)[:2]
        taste = torch.softmax(2.0 * torch.randn(CATEGORIES, generator=g), 0)
        basket = torch.zeros(ITEMS)
        for t in range(HISTORY - length, HISTORY + 1):
            basket = _basket(basket, staples, taste, g)
            if t < HISTORY:
                history[i, t] = basket
        after[i] = basket
    return history, after


def baskets_last_in_history(history: torch.Tensor, basket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The history and, as the target, ``baskets[t - 1]``: the last basket of the history."""
    return history, history[-1]


def drop_history_items(history: torch.Tensor, basket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Item dropout: each item of the history is forgotten with probability 0.2 (the target is kept)."""
    return history * (torch.rand(history.shape) > 0.2).float(), basket


# --- selective classification: points with label noise in half the space -----------------------------------
FEATURES, CLASSES = 10, 4


def noisy_points(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` points of 10 standard normal features; the class is the argmax of a fixed linear map of the
    first six, and it is replaced by a uniformly random class with a probability that rises with the last
    feature (0 .. 0.8: the right half of the space is mostly noise)."""
    x = torch.randn(n, FEATURES, generator=_gen(seed))
    w = torch.randn(6, CLASSES, generator=_gen(300))
    clean = (x[:, :6] @ w).argmax(-1)
    g = _gen(seed + 500)
    flip = torch.rand(n, generator=g) < 0.8 * torch.sigmoid(3 * x[:, -1])
    return x, torch.where(flip, torch.randint(CLASSES, (n,), generator=g), clean)


# --- formal-language recognition: balanced bracket strings --------------------------------------------------
BRACKETS = "()[]"
PAD, MAX_LENGTH = 0, 20
VOCAB = 5  # the pad and the four brackets (ids 1..4)


def balanced(s: str) -> bool:
    stack: list[str] = []
    for ch in s:
        if ch in "([":
            stack.append(ch)
        elif not stack or stack.pop() != {")": "(", "]": "["}[ch]:
            return False
    return not stack


def _dyck(length: int, g: torch.Generator) -> str:
    out, stack = [], []
    for i in range(length):
        left = length - i
        close = bool(stack) and (left <= len(stack) or float(torch.rand((), generator=g)) < 0.45)
        if close:
            out.append({"(": ")", "[": "]"}[stack.pop()])
        else:
            ch = "(["[int(torch.randint(2, (), generator=g))]
            stack.append(ch)
            out.append(ch)
    return "".join(out)


def _corrupt(s: str, g: torch.Generator) -> str:
    chars = list(s)
    while True:
        kind = int(torch.randint(3, (), generator=g))
        c = list(chars)
        i = int(torch.randint(len(c), (), generator=g))
        if kind == 0 and len(c) > 1:  # swap two neighbours
            i = min(i, len(c) - 2)
            c[i], c[i + 1] = c[i + 1], c[i]
        elif kind == 1:  # the other bracket type
            c[i] = {"(": "[", "[": "(", ")": "]", "]": ")"}[c[i]]
        else:  # an opener turned into a closer, and another closer into an opener
            j = int(torch.randint(len(c), (), generator=g))
            c[i] = {"(": ")", "[": "]", ")": "(", "]": "["}[c[i]]
            c[j] = {"(": ")", "[": "]", ")": "(", "]": "["}[c[j]]
        out = "".join(c)
        if not balanced(out):
            return out


def _drop_one(s: str, g: torch.Generator) -> str:
    i = int(torch.randint(len(s), (), generator=g))
    return s[:i] + s[i + 1 :]


@cache
def bracket_strings(n: int, seed: int, odd_negatives: bool = False) -> tuple[list[str], torch.Tensor]:
    """``n`` strings of 2..20 brackets of two types, half balanced and half one or two edits away from
    balanced (neighbours swapped, a bracket's type changed, or an opener and a closer turned), with the same
    lengths; and whether each is balanced. With ``odd_negatives`` the unbalanced strings are made by
    dropping one bracket of a balanced one instead."""
    g = _gen(seed)
    strings, labels = [], []
    for _ in range(n):
        s = _dyck(2 * (1 + int(torch.randint(MAX_LENGTH // 2, (), generator=g))), g)
        good = bool(torch.rand((), generator=g) < 0.5)
        strings.append(s if good else (_drop_one if odd_negatives else _corrupt)(s, g))
        labels.append(float(good))
    return strings, torch.tensor(labels)


def encode(s: str) -> torch.Tensor:
    """Token ids 1..4 (0 is the pad)."""
    return torch.tensor([BRACKETS.index(ch) + 1 for ch in s])


def backwards(s: str) -> str:
    """The string read backwards, each bracket left as it is (a balanced string becomes unbalanced)."""
    return s[::-1]


def mirror(s: str) -> str:
    """The string read backwards with every bracket turned around: balanced if and only if ``s`` is."""
    return s[::-1].translate(str.maketrans("()[]", ")(]["))


class Brackets(Dataset):
    """Bracket strings read as (token ids, label); ``augment`` (a string to string map, applied with
    probability 0.5) at read time."""

    def __init__(self, strings: list[str], labels: torch.Tensor, encoder=encode, augment=None) -> None:
        self.strings, self.labels, self.encoder, self.augment = strings, labels, encoder, augment

    def __len__(self) -> int:
        return len(self.strings)

    def __getitem__(self, i: int):
        s = self.strings[i]
        if self.augment is not None and torch.rand(()) < 0.5:
            s = self.augment(s)
        return self.encoder(s), self.labels[i]


def pad_right(rows) -> tuple[torch.Tensor, torch.Tensor]:
    """Collate: token ids padded with 0 at the end, (B, T); labels (B,)."""
    tokens, labels = zip(*rows, strict=True)
    return pad_sequence(tokens, batch_first=True, padding_value=0), torch.stack(labels)


def pad_left(rows) -> tuple[torch.Tensor, torch.Tensor]:
    """Collate: token ids padded with 0 at the start (the last column is every string's last bracket)."""
    tokens, labels = zip(*rows, strict=True)
    flipped = pad_sequence([t.flip(0) for t in tokens], batch_first=True, padding_value=0)
    return flipped.flip(1), torch.stack(labels)


def batch_of(strings: list[str]) -> torch.Tensor:
    """Served input: the strings encoded and right-padded."""
    return pad_right([(encode(s), torch.tensor(0.0)) for s in strings])[0]
