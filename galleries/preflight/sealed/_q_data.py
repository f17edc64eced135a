"""Sealed gallery P's data, half ``q``: small seeded synthetic sets (logged episodes of a corridor walk,
users' item histories, documents of sentence embeddings, damped oscillator simulations, small graphs as edge
lists, lab panels for a screening test, word frequencies of snippets cut from books). Every builder is
deterministic (its own generator); random augmentation and sampling at read time draw from the global RNG."""

from __future__ import annotations

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


# --- Monte-Carlo value estimation: a corridor walk logged as one flat buffer --------------------------------
CELLS, GAMMA, STEP_COST = 15, 0.9, 0.01
RIGHT = torch.linspace(0.5, 0.75, CELLS)  # the behaviour policy's chance of stepping right in each cell


def observe(cells: torch.Tensor, g: torch.Generator | None = None) -> torch.Tensor:
    """A cell's observation: its one-hot code and two distractor readings (a clock and sensor noise) that
    carry nothing about the value."""
    noise = torch.rand(len(cells), 2, generator=g) if g is not None else torch.rand(len(cells), 2)
    return torch.cat([torch.eye(CELLS)[cells], noise], 1)


def episodes(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``count`` episodes of a walk started in a random inner cell, stepping right with probability
    ``RIGHT[cell]``, paying 0.01 a step and ending at either end (+1 at the right one, 0 at the left), logged
    back to back as one buffer: (observations, rewards, dones)."""
    g = _gen(seed)
    cells, rewards, dones = [], [], []
    for _ in range(count):
        cell = int(torch.randint(1, CELLS - 1, (), generator=g))
        while True:
            cells.append(cell)
            cell += 1 if torch.rand((), generator=g) < RIGHT[cell] else -1
            end = cell in (0, CELLS - 1)
            rewards.append(reward(cell))
            dones.append(end)
            if end:
                break
    cells_t = torch.tensor(cells)
    done_t = torch.tensor(dones, dtype=torch.float32)
    return observe(cells_t, g), torch.tensor(rewards), done_t


def reward(cell: int) -> float:
    """The reward of a step that lands in ``cell``."""
    return -STEP_COST + (1.0 if cell == CELLS - 1 else 0.0)


def returns_to_go(rewards: torch.Tensor, dones: torch.Tensor, gamma: float = GAMMA) -> torch.Tensor:
    """The discounted reward-to-go of every step of a flat buffer, restarted at each episode's end."""
    out, running = torch.zeros_like(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running * (1.0 - dones[t])
        out[t] = running
    return out


def returns_over_buffer(rewards: torch.Tensor, dones: torch.Tensor, gamma: float = GAMMA) -> torch.Tensor:
    """The BUG: the reward-to-go loop copied from a single-episode script: it never looks at ``dones``, so
    every episode's returns run on into the next episode's rewards."""
    out, running = torch.zeros_like(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def true_values(gamma: float = GAMMA) -> torch.Tensor:
    """The exact value of every inner cell under the behaviour policy (a linear solve)."""
    inner = CELLS - 2
    p = torch.zeros(inner, inner, dtype=torch.float64)
    r = torch.full((inner,), -STEP_COST, dtype=torch.float64)
    for i, cell in enumerate(range(1, CELLS - 1)):
        right = float(RIGHT[cell])
        if cell + 1 < CELLS - 1:
            p[i, i + 1] = right
        else:
            r[i] += right
        if cell - 1 > 0:
            p[i, i - 1] = 1 - right
    values = torch.linalg.solve(torch.eye(inner, dtype=torch.float64) - gamma * p, r)
    return values.float()


# --- collaborative filtering from users' item histories ----------------------------------------------------
ITEMS, GENRES, KEPT = 120, 12, 0.7


def histories(users: int, seed: int) -> torch.Tensor:
    """``users`` rows of 120 items (1 where the user consumed the item): each item belongs to one of 12 genres
    of 10, each user likes two genres and consumes 6..14 items, 90% of them from the liked genres, weighted
    by popularity."""
    g = _gen(seed)
    genre = torch.arange(ITEMS) % GENRES
    popularity = torch.rand(ITEMS, generator=_gen(71)) + 0.2
    out = torch.zeros(users, ITEMS)
    for u in range(users):
        liked = torch.randperm(GENRES, generator=g)[:2]
        weight = popularity * torch.where(torch.isin(genre, liked), 0.9 / 20, 0.1 / 100)
        count = int(torch.randint(6, 15, (), generator=g))
        out[u, torch.multinomial(weight, count, generator=g)] = 1.0
    return out


def fold_in(rows: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out users' histories split into what the model is shown (70% of each user's items) and what it
    should recommend (the other 30%)."""
    shown = rows * (torch.rand(rows.shape, generator=_gen(seed)) < KEPT)
    return shown, rows - shown


# --- extractive summarisation: documents as sentence embeddings --------------------------------------------
SENTENCES, DIM, SUMMARY = 12, 16, 3


def documents(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` documents of 6..12 sentences (padded to 12 with zeros), each sentence a unit-length embedding
    (from a frozen sentence encoder) scattered around the document's topic; the mask of real sentences and
    the summary: the 3 sentences closest to the document's centroid (centroid summarisation)."""
    g = _gen(seed)
    topic = torch.randn(n, 1, DIM, generator=g)
    spread = 0.6 + 1.6 * torch.rand(n, SENTENCES, 1, generator=g)
    sents = topic + spread * torch.randn(n, SENTENCES, DIM, generator=g)
    sents = sents / sents.norm(dim=-1, keepdim=True)
    count = torch.randint(6, SENTENCES + 1, (n, 1), generator=g)
    mask = (torch.arange(SENTENCES) < count).float()
    sents = sents * mask[..., None]
    centroid = sents.sum(1, keepdim=True) / count[..., None]
    closeness = torch.where(mask.bool(), (sents * centroid).sum(-1), -float("inf"))
    summary = torch.zeros(n, SENTENCES)
    summary.scatter_(1, closeness.topk(SUMMARY, dim=1).indices, 1.0)
    return sents, mask, summary


def shuffle_sentences(sents, mask, summary):
    """Augmentation: the real sentences in a fresh random order (the summary's marks move with them)."""
    order = _order(mask)
    return sents[order], mask, summary[order]


def shuffle_sentences_only(sents, mask, summary):
    """The BUG: the sentences are reordered and the summary marks are left where they were."""
    order = _order(mask)
    return sents[order], mask, summary


def _order(mask: torch.Tensor) -> torch.Tensor:
    count = int(mask.sum())
    return torch.cat([torch.randperm(count), torch.arange(count, SENTENCES)])


# --- inferring a damped oscillator's parameters from a noisy recording -------------------------------------
SAMPLES = 64
PRIOR = torch.tensor([[0.5, 2.0], [1.0, 3.0], [0.05, 0.5]])  # amplitude, angular frequency, damping


def oscillations(n: int, seed: int, noise: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` simulated recordings (64 samples over 8 s) of A exp(-d t) cos(w t + phase) plus sensor noise,
    the parameters (A, w, d) drawn uniformly from ``PRIOR`` and the phase at random; returns the clean
    curves when ``noise`` is 0 (noise is added at read time by :func:`add_noise`) and the parameters."""
    g = _gen(seed)
    low, high = PRIOR[:, 0], PRIOR[:, 1]
    params = low + (high - low) * torch.rand(n, 3, generator=g)
    phase = 6.283 * torch.rand(n, 1, generator=g)
    t = torch.linspace(0, 8, SAMPLES)
    amp, freq, damp = params[:, :1], params[:, 1:2], params[:, 2:]
    curve = amp * torch.exp(-damp * t) * torch.cos(freq * t + phase)
    return curve + noise * torch.randn(curve.shape, generator=g), params


def add_noise(curve: torch.Tensor, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Simulator noise drawn afresh on every read (the same 0.05 sensor noise as the recordings)."""
    return curve + 0.05 * torch.randn(curve.shape), params


# --- node regression on small graphs given as edge lists ----------------------------------------------------
NODES, FEATURES = 12, 4


def graphs(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``n`` undirected graphs of 12 nodes (random edges with a few hubs), each as (node features (12, 4),
    edge list (2, E), node targets (12,)); the edge list holds each edge once (i < j), as a friendship table
    stores it. A node's target is its own feature 0 times the mean of its neighbours' feature 1, plus its
    feature 2 (feature 3 matters nowhere); a node with no neighbours has neighbour mean 0."""
    g = _gen(seed)
    out = []
    for _ in range(n):
        x = torch.randn(NODES, FEATURES, generator=g)
        hub = torch.rand(NODES, generator=g) < 0.2
        p = 0.12 + 0.35 * (hub[:, None] | hub[None, :])
        upper = torch.triu(torch.rand(NODES, NODES, generator=g) < p, diagonal=1)
        adj = (upper | upper.T).float()
        mean = (adj @ x[:, 1]) / adj.sum(1).clamp_min(1)
        out.append((x, upper.nonzero().T, x[:, 0] * mean + x[:, 2]))
    return out


def collate_graphs(batch):
    """Graphs batched as one disconnected graph: node rows stacked, each graph's edge indices shifted by the
    number of nodes before it."""
    xs, edges, ys = zip(*batch, strict=True)
    starts = torch.tensor([0, *[len(x) for x in xs]]).cumsum(0)[:-1]
    return torch.cat(xs), torch.cat([e + s for e, s in zip(edges, starts, strict=True)], 1), torch.cat(ys)


def collate_graphs_unshifted(batch):
    """The BUG: the edge lists are concatenated as they are, without shifting each graph's indices: every
    edge of every graph lands among the first graph's 12 nodes."""
    xs, edges, ys = zip(*batch, strict=True)
    return torch.cat(xs), torch.cat(edges, 1), torch.cat(ys)


# --- screening for a rare condition from a lab panel --------------------------------------------------------
LABS = 10
UNITS = torch.tensor([0.01, 0.1, 1.0, 5.0, 20.0, 60.0, 150.0, 400.0, 1000.0, 2.0])
BASE = torch.tensor([0.05, 1.0, 4.0, 40.0, 90.0, 140.0, 300.0, 2000.0, 5000.0, 7.4])


def panels(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` patients' lab panels in clinical units (scales from 0.01 to 1,000) and the diagnosis (about
    15% positive): the condition's log-odds are a nonlinear rule of four standardised labs; 6 labs are
    irrelevant."""
    g = _gen(seed)
    z = torch.randn(n, LABS, generator=g)
    logit = 1.6 * z[:, 0] - 1.2 * z[:, 3] + 1.5 * z[:, 5] * z[:, 7] + 1.0 * (z[:, 7] ** 2 - 1) - 2.6
    y = torch.bernoulli(torch.sigmoid(logit), generator=g)
    return BASE + UNITS * z, y


class Standardiser:
    """The lab-panel scaler, fitted on the training panels."""

    def __init__(self, x: torch.Tensor) -> None:
        self.mean, self.std = x.mean(0), x.std(0)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def scaler() -> Standardiser:
    """The scaler a served model applies (fitted on the training panels, seed 1)."""
    return Standardiser(panels(3000, 1)[0])


def oversample(x: torch.Tensor, y: torch.Tensor, times: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """The positive rows repeated ``times`` times in all (duplicates), the negatives once."""
    pos = y == 1
    return torch.cat([x, *[x[pos]] * (times - 1)]), torch.cat([y, *[y[pos]] * (times - 1)])


def permutation(n: int, seed: int) -> torch.Tensor:
    """A fixed random order of ``n`` rows (the split's shuffle)."""
    return torch.randperm(n, generator=_gen(seed))


# --- authorship attribution of snippets cut from books ------------------------------------------------------
AUTHORS, STYLE_WORDS, TOPIC_WORDS, SNIPPET = 5, 40, 150, 60
BOOKS = (12, 8, 5, 4, 3)  # each author's books in the training pool (imbalanced)


def _style() -> torch.Tensor:
    """Each author's use of the 40 function words (a fixed, mildly different distribution per author)."""
    return torch.softmax(0.9 * torch.randn(AUTHORS, STYLE_WORDS, generator=_gen(61)), -1)


def snippets(books: tuple[int, ...], seed: int, per_book: int = 60) -> tuple[torch.Tensor, ...]:
    """Snippets of 60 words cut from ``books[a]`` books by each author ``a``: half the words are function
    words drawn from the author's style, half are topic words drawn from the book's own topic (10 favourite
    words out of 150). Returns (word frequencies (n, 190), author, book number)."""
    g, style = _gen(seed), _style()
    rows, authors, book_ids = [], [], []
    book = 0
    for author, count in enumerate(books):
        for _ in range(count):
            topic = torch.full((TOPIC_WORDS,), 0.02)
            topic[torch.randperm(TOPIC_WORDS, generator=g)[:10]] = 1.0
            for _ in range(per_book):
                words = torch.cat(
                    [
                        torch.multinomial(style[author], SNIPPET // 2, replacement=True, generator=g),
                        STYLE_WORDS + torch.multinomial(topic, SNIPPET // 2, replacement=True, generator=g),
                    ]
                )
                rows.append(torch.bincount(words, minlength=STYLE_WORDS + TOPIC_WORDS) / SNIPPET)
                authors.append(author)
                book_ids.append(book)
            book += 1
    return torch.stack(rows), torch.tensor(authors), torch.tensor(book_ids)


def balancing_weights(authors: torch.Tensor) -> torch.Tensor:
    """Each snippet's sampling weight: one over its author's snippet count (each author drawn equally)."""
    return 1.0 / torch.bincount(authors)[authors].float()


def frequency_weights(authors: torch.Tensor) -> torch.Tensor:
    """The BUG: each snippet weighted by its author's snippet count (the count where its inverse belongs):
    the prolific authors are drawn even more often than they occur."""
    return torch.bincount(authors)[authors].float()
