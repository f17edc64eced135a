"""Sealed gallery ZX's models (half ``zx2``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it is validated on (and,
unless its ``training_step`` says otherwise, trained on)."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from galleries.preflight.sealed import _zx2_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))


# --- image colourisation ------------------------------------------------------------------------------------
class Colouriser(_Adam):
    """A CNN with batch norm from the grey image to three colour offsets added to it (a colour image is its
    grey level plus a chroma offset per channel, negative as often as positive); squared error of the served
    image against the colour one. Served: the colour image, clipped to [0, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 3, 1),
        )

    def offsets(self, grey: torch.Tensor) -> torch.Tensor:
        return self.net(grey)

    def forward(self, grey: torch.Tensor) -> torch.Tensor:
        return grey + self.offsets(grey)

    def loss(self, batch) -> torch.Tensor:
        grey, rgb = batch
        return F.mse_loss(self(grey), rgb)

    def predict(self, grey: torch.Tensor) -> torch.Tensor:
        return self(grey).clamp(0, 1)


class ColouriserSigmoidOffsets(Colouriser):
    """BUG: the head ends in a sigmoid (kept from the RGB head this one was adapted from): the offsets are
    squashed into (0, 1), no channel can be darker than the grey level, and a red shape's green and blue
    channels, or the grey background's, cannot be served."""

    def offsets(self, grey: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(grey))


class ColouriserBins(Colouriser):
    """Colourisation as classification (as in Zhang et al.): the chroma (R - Y, B - Y) is quantised into a
    7 x 7 grid of bins and each pixel gets a cross-entropy over the 49 bins; served: the grey level plus the
    probability-weighted chroma, the green channel solved from the luminance."""

    BINS = 7
    RANGE = 0.75

    def __init__(self) -> None:
        super().__init__()
        self.net[-1] = nn.Conv2d(32, self.BINS**2, 1)
        centres = torch.linspace(-self.RANGE, self.RANGE, self.BINS)
        u, v = torch.meshgrid(centres, centres, indexing="ij")
        self.register_buffer("centres", torch.stack([u.flatten(), v.flatten()], 1))  # (49, 2)

    def bin_of(self, grey: torch.Tensor, rgb: torch.Tensor) -> torch.Tensor:
        chroma = torch.stack([rgb[:, 0] - grey[:, 0], rgb[:, 2] - grey[:, 0]], 1)  # (B, 2, H, W)
        index = ((chroma + self.RANGE) / (2 * self.RANGE) * (self.BINS - 1)).round().clamp(0, self.BINS - 1)
        return (index[:, 0] * self.BINS + index[:, 1]).long()

    def forward(self, grey: torch.Tensor) -> torch.Tensor:
        p = torch.softmax(self.net(grey), 1)  # (B, 49, H, W)
        chroma = torch.einsum("bkhw,kc->bchw", p, self.centres)
        red, blue = grey[:, 0] + chroma[:, 0], grey[:, 0] + chroma[:, 1]
        lum = data.LUMA
        green = (grey[:, 0] - lum[0] * red - lum[2] * blue) / lum[1]
        return torch.stack([red, green, blue], 1)

    def loss(self, batch) -> torch.Tensor:
        grey, rgb = batch
        return F.cross_entropy(self.net(grey), self.bin_of(grey, rgb))


# --- unsupervised domain adaptation (DANN) ------------------------------------------------------------------
class _ReverseGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: float) -> torch.Tensor:
        ctx.weight = weight
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return -ctx.weight * grad, None


class DANN(_Adam):
    """Domain-adversarial training: a feature MLP shared by a digit classifier (trained on the labelled
    source digits) and a domain classifier (source or target) that reads the features through a
    gradient-reversal layer (weight 0.3): the features are trained to *raise* the domain loss. The learning
    rate is annealed per step (1 + 10 p)^-0.75. ``loss`` (validation) is the digit cross-entropy on labelled
    target digits. Served: the digit class."""

    lr = 2e-3
    reversal = 0.3

    def __init__(self) -> None:
        super().__init__()
        self.features = mlp(64, 128, 32)
        self.classifier = nn.Sequential(nn.ReLU(), nn.Linear(32, 10))
        self.domain = mlp(32, 64, 1)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        total = max(1, self.trainer.estimated_stepping_batches)
        anneal = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: (1 + 10 * step / total) ** -0.75)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": anneal, "interval": "step"}}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))

    def domain_input(self, features: torch.Tensor) -> torch.Tensor:
        return _ReverseGrad.apply(features, self.reversal)

    def training_step(self, batch, batch_idx):
        source, label, target = batch
        h = self.features(torch.cat([source, target]))
        task = F.cross_entropy(self.classifier(h[: len(source)]), label)
        is_target = torch.cat([torch.zeros(len(source)), torch.ones(len(target))]).to(h)
        domain = F.binary_cross_entropy_with_logits(self.domain(self.domain_input(h))[:, 0], is_target)
        self.log("train_loss", task)
        self.log("domain_loss", domain)
        return task + domain

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class DANNWithoutReversal(DANN):
    """BUG: the gradient-reversal layer was lost in a refactor (the domain head reads the features
    directly): the features are trained to help the domain classifier, so they keep the stain apart from
    the digits instead of ignoring it, and the source-trained classifier misreads the target digits."""

    def domain_input(self, features: torch.Tensor) -> torch.Tensor:
        return features


# --- value learning on a gridworld (fitted Q-iteration) -----------------------------------------------------
class QNet(_Adam):
    """Fitted Q-iteration from logged transitions: an MLP from the one-hot state to the four actions'
    values, regressed on the TD target r + 0.9 (1 - done) max_a' Q_target(s', a') of a target network synced
    with it every 20 steps. Served: the greedy action of each state."""

    lr = 2e-3
    sync_every = 20

    def __init__(self) -> None:
        super().__init__()
        self.q = mlp(data.STATES, 64, data.ACTIONS)
        self.target = copy.deepcopy(self.q).requires_grad_(False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.q.parameters(), lr=self.lr)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.q(F.one_hot(state, data.STATES).float())

    @torch.no_grad()
    def bootstrap(self, next_state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.target(F.one_hot(next_state, data.STATES).float()).max(-1).values

    def td_target(self, batch) -> torch.Tensor:
        _, action, reward, next_state, done = batch
        return reward + data.GAMMA * (1 - done) * self.bootstrap(next_state, action)

    def loss(self, batch) -> torch.Tensor:
        state, action = batch[0], batch[1]
        q = self(state).gather(1, action[:, None])[:, 0]
        return F.mse_loss(q, self.td_target(batch))

    def sync(self) -> None:
        self.target.load_state_dict(self.q.state_dict())

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.global_step % self.sync_every == 0:
            self.sync()

    def predict(self, state: torch.Tensor) -> torch.Tensor:
        return self(state).argmax(-1)


class QNetSyncsItself(QNet):
    """BUG: the sync copies the target network's own weights into itself (``self.target.load_state_dict(
    self.target.state_dict())``, a slip): the target stays at its random start, every TD target is one
    step of cost plus noise, and the values never carry the goal more than one step back."""

    def sync(self) -> None:
        self.target.load_state_dict(self.target.state_dict())


class QNetIgnoresDone(QNet):
    """BUG: the TD target leaves out the (1 - done) factor: the step into the goal bootstraps from the
    goal's own values, which no transition ever trains (the goal is terminal) and which sit near the
    network's average value, so reaching the goal looks no better than wandering."""

    def td_target(self, batch) -> torch.Tensor:
        _, action, reward, next_state, _ = batch
        return reward + data.GAMMA * self.bootstrap(next_state, action)


class QNetLoggedAction(QNet):
    """BUG: the bootstrap gathers the target's value of the logged action at the next state
    (``gather(1, action)``, as in the line above it) instead of the max over actions: it learns the value of
    repeating one action forever, and its greedy policy walks straight into walls."""

    @torch.no_grad()
    def bootstrap(self, next_state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        q = self.target(F.one_hot(next_state, data.STATES).float())
        return q.gather(1, action[:, None])[:, 0]


class DoubleQNetHuber(QNet):
    """Double DQN with a Huber loss and a soft (Polyak, tau 0.05) target update after every step: the
    online network picks the next action, the target network values it; the rewards are divided by 10 for
    training (the greedy action is unchanged by a positive scale)."""

    tau = 0.05

    @torch.no_grad()
    def bootstrap(self, next_state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        one_hot = F.one_hot(next_state, data.STATES).float()
        best = self.q(one_hot).argmax(-1, keepdim=True)
        return self.target(one_hot).gather(1, best)[:, 0]

    def td_target(self, batch) -> torch.Tensor:
        _, action, reward, next_state, done = batch
        return reward / 10 + data.GAMMA * (1 - done) * self.bootstrap(next_state, action)

    def loss(self, batch) -> torch.Tensor:
        state, action = batch[0], batch[1]
        q = self(state).gather(1, action[:, None])[:, 0]
        return F.smooth_l1_loss(q, self.td_target(batch), beta=0.1)

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        for target, online in zip(self.target.parameters(), self.q.parameters(), strict=True):
            target.lerp_(online, self.tau)


# --- next-basket prediction ---------------------------------------------------------------------------------
class NextBasket(_Adam):
    """An MLP over the history's item frequencies (per basket of the history) and its last basket (the
    history is oldest first, left-padded), one logit per item; binary cross-entropy against the multi-hot
    next basket. Served: the item scores (the top five are recommended)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.ITEMS, 128, data.ITEMS)

    def last_basket(self, history: torch.Tensor) -> torch.Tensor:
        return history[:, -1]

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        length = (history.sum(-1) > 0).sum(-1, keepdim=True).clamp(min=1)
        frequency = history.sum(1) / length
        return self.net(torch.cat([frequency, self.last_basket(history)], -1))

    def basket_loss(self, logits: torch.Tensor, basket: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits, basket)

    def loss(self, batch) -> torch.Tensor:
        history, basket = batch
        return self.basket_loss(self(history), basket)

    def predict(self, history: torch.Tensor) -> torch.Tensor:
        return self(history)


class NextBasketFirstItemOnly(NextBasket):
    """BUG: the loss is the classifier template's ``cross_entropy(logits, basket.argmax(-1))``: argmax of a
    multi-hot vector is its lowest item id, so each basket teaches one item, the one with the smallest id,
    and the scores learn to favour low ids."""

    def basket_loss(self, logits: torch.Tensor, basket: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, basket.argmax(-1))


class NextBasketOldestAsLast(NextBasket):
    """BUG: the "last basket" is read as ``history[:, 0]`` (written for newest-first histories), but the
    histories are oldest first and left-padded: it is an empty pad for most shoppers, or their oldest basket,
    and the items that follow the latest basket are not predicted."""

    def last_basket(self, history: torch.Tensor) -> torch.Tensor:
        return history[:, 0]


class NextBasketListwise(NextBasket):
    """A listwise loss: softmax over the 40 items against the next basket normalised to sum to one; the
    loss cannot fall below the baskets' mean entropy (their mean log size, 1.77 in training), which is
    declared as its constant offset."""

    loss_offset = 1.77

    def basket_loss(self, logits: torch.Tensor, basket: torch.Tensor) -> torch.Tensor:
        share = basket / basket.sum(-1, keepdim=True).clamp(min=1)
        return -(share * torch.log_softmax(logits, -1)).sum(-1).mean()


# --- selective classification (a reject option) -------------------------------------------------------------
class SoftmaxResponse(_Adam):
    """An MLP classifier trained with cross-entropy; the abstain score is the softmax response (the top
    class's probability): the served answer is (class, confidence), and the least confident are rejected."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATURES, 64, 64, data.CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def confidence(self, p: torch.Tensor) -> torch.Tensor:
        return p.max(-1).values

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p = torch.softmax(self(x), -1)
        return p.argmax(-1), self.confidence(p)


class SoftmaxResponseEntropy(SoftmaxResponse):
    """BUG: the served confidence is the predictive entropy (a measure of doubt, from the uncertainty
    notebook): the reject rule keeps the highest scores, so it answers the most doubtful points and rejects
    the surest."""

    def confidence(self, p: torch.Tensor) -> torch.Tensor:
        return -(p * p.clamp(min=1e-12).log()).sum(-1)


class SelectorHead(_Adam):
    """A shared body with a classifier head and a selector head: the classifier is trained with
    cross-entropy, the selector (on detached features) with binary cross-entropy to predict whether the
    classifier's answer is right. Served: (class, the selector's probability of being right)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(mlp(data.FEATURES, 64, 64), nn.ReLU())
        self.classifier = nn.Linear(64, data.CLASSES)
        self.selector = mlp(64, 32, 1)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        h = self.body(x)
        logits = self.classifier(h)
        right = (logits.argmax(-1) == label).float()
        selector = F.binary_cross_entropy_with_logits(self.selector(h.detach())[:, 0], right)
        return F.cross_entropy(logits, label) + selector

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return self.classifier(h).argmax(-1), torch.sigmoid(self.selector(h)[:, 0])


class SelectorHeadNotOptimised(SelectorHead):
    """BUG: ``configure_optimizers`` lists the body's and the classifier's parameters (the selector was
    added later): the selector head keeps its random weights, its loss is computed and never lowered, and
    the served confidence does not know which answers are right."""

    def configure_optimizers(self):
        params = [*self.body.parameters(), *self.classifier.parameters()]
        return torch.optim.Adam(params, lr=self.lr)


class DeepGamblers(SoftmaxResponse):
    """Deep Gamblers: a fifth output, "abstain", and the gambler's loss -log(p_y + p_abstain / 2.2) (an
    abstention pays back part of the bet); served confidence: 1 - p_abstain."""

    payoff = 2.2

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATURES, 64, 64, data.CLASSES + 1)

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        p = torch.softmax(self(x), -1)
        bet = p.gather(1, label[:, None])[:, 0] + p[:, -1] / self.payoff
        return -bet.clamp(min=1e-12).log().mean()

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p = torch.softmax(self(x), -1)
        return p[:, :-1].argmax(-1), 1 - p[:, -1]


# --- formal-language recognition: balanced brackets ---------------------------------------------------------
class BracketGRU(_Adam):
    """A GRU over embedded bracket tokens (right-padded with 0; packed by each string's length, so the
    final state is read at the string's last bracket), a logistic head. Served: the probability that the
    string is balanced."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(data.VOCAB, 16, padding_idx=data.PAD)
        self.gru = nn.GRU(16, 64, batch_first=True)
        self.head = nn.Linear(64, 1)

    def final_state(self, tokens: torch.Tensor) -> torch.Tensor:
        lengths = (tokens != data.PAD).sum(1).cpu()
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        return self.gru(packed)[1][0]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.final_state(tokens))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        tokens, label = batch
        return F.binary_cross_entropy_with_logits(self(tokens), label)

    def predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(tokens))


class BracketGRULeftPadded(BracketGRU):
    """Left-padded batches (the pads come first) read unpacked at the last column: right for left padding,
    where the last column is every string's last bracket (the embedding of the pad is zero)."""

    def final_state(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.gru(self.embed(tokens))[0][:, -1]

    def predict(self, tokens: torch.Tensor) -> torch.Tensor:
        lengths = (tokens != data.PAD).sum(1)
        left = torch.stack([t.roll(int(t.numel() - n)) for t, n in zip(tokens, lengths, strict=True)])
        return torch.sigmoid(self(left))
