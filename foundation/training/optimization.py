"""Optimisation for both loops: one parameter-grouping rule, one schedule, ELECTRA's optimiser.

Fine-tuning (tasks/optim.py) and pre-training (pretrain/prepare.py, pretrain/budget.py) both group
their parameters with `parameter_groups`, take their learning rate from `scheduled_rate` and build
their optimiser with `build_optimizer`. Imports only torch.

Grouping: a group per (depth, decays) of the trainable parameters. Weight decay spares NO_DECAY names;
a group's learning-rate scale is a function of its depth: layer-wise decay in fine-tuning (embeddings
0, encoder layer i at i+1, the head on top), `disc_layers_lr_scale` in pre-training (the
discriminator's layers and head at depth 1, the rest at 0).

The schedule, google-research/electra `model/optimization.py`, `create_optimizer`, multiplies the
warmup into the decay: lr(step) = peak·(1 − step/T)·min(1, step/W), W = T·warmup_fraction (a float,
not rounded), so step 0 has lr 0, and the rate never reaches the peak (at step W it is peak·(1 − W/T)).
"adamw" warms up linearly, then decays linearly to zero.

ElectraAdam is `AdamWeightDecayOptimizer._apply_gradients` there:

    m = beta1·m + (1 − beta1)·g          v = beta2·v + (1 − beta2)·g²
    update = m / (sqrt(v) + eps) + weight_decay·param      (weight decay only where the group has it)
    param = param − lr·update

Without bias correction, under a steady gradient step t moves (1 − beta1^t)/sqrt(1 − beta2^t) times
as far as torch's AdamW at the same lr: 3.2x at step 1, 6.5x at step 10, 3.2x at 100, 1.3x at 1,000.
ELECTRA's learning rates were tuned with these larger early steps. Weight decay is decoupled and
scaled by lr, from the parameter before the step, as in torch's AdamW.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch

# ELECTRA's exclude_from_weight_decay (biases, "LayerNorm", "layer_norm"), and "norm" for families that
# name their norms so (ModernBERT: "norm", "mlp_norm", "final_norm").
NO_DECAY = ("bias", "LayerNorm", "layer_norm", "norm")


def decays(name: str) -> bool:
    """Whether weight decay applies to the parameter of this name: not to biases and norms."""
    return not any(marker in name for marker in NO_DECAY)


def layer_depths(model: torch.nn.Module, layers: Sequence[torch.nn.Module],
                 head_depth: int) -> dict[str, int]:
    """Depth of each parameter by name: embeddings 0 (word, position, relative-position embeddings and
    their projection), the parameters of `layers[i]` at i+1, anything else (the head, a pooler, a
    final norm) at head_depth."""
    in_layer = {id(p): i + 1 for i, layer in enumerate(layers) for p in layer.parameters()}
    return {name: in_layer.get(id(p), 0 if "embed" in name.lower() else head_depth)
            for name, p in model.named_parameters()}


def parameter_groups(model: torch.nn.Module, weight_decay: float, depth: Callable[[str], int],
                     scale: Callable[[int], float], peak: float | None = None,
                     decaying_first: bool = False) -> list[dict]:
    """The trainable parameters in a group per (depth(name), decays(name)), with `weight_decay` where
    they decay and 0 where not. A group's rate is scale(depth): as "lr" = peak·scale where `peak` is
    given (fine-tuning: its schedule multiplies each group's own rate), else as "lr_scale" (pre-training
    multiplies it into the scheduled rate each step).

    Groups come by rising depth, no-decay before decay (fine-tuning's order), or with `decaying_first`
    the decaying groups, then the others, each by falling depth (pre-training's). A saved optimiser
    state pairs its groups with the model's by position, so neither order may change.
    """
    groups: dict[tuple[int, bool], dict] = {}
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        at, decaying = depth(name), decays(name)
        rate = {"lr": peak * scale(at)} if peak is not None else {"lr_scale": scale(at)}
        group = groups.setdefault((at, decaying), {"params": [], **rate,
                                                   "weight_decay": weight_decay if decaying else 0.0})
        group["params"].append(parameter)
    if decaying_first:
        return [groups[key] for key in sorted(groups, key=lambda key: (key[1], key[0]), reverse=True)]
    return [groups[key] for key in sorted(groups)]


def build_optimizer(groups: list[dict], algorithm: str, learning_rate: float, epsilon: float,
                    fused: bool, compiled: bool = False) -> torch.optim.Optimizer:
    """ElectraAdam ("electra", ELECTRA's AdamWeightDecayOptimizer), its update compiled where `compiled`,
    or torch's AdamW ("adamw"), fused where `fused` (one kernel: nothing to compile); `algorithm`: the
    `optimizer` setting's value; `learning_rate` for groups that name none."""
    if algorithm == "electra":
        return ElectraAdam(groups, lr=learning_rate, eps=epsilon, compiled=compiled)
    return torch.optim.AdamW(groups, lr=learning_rate, eps=epsilon, fused=fused)


def electra_lr_factor(step: float, num_steps: float, warmup_steps: float) -> float:
    """Multiplier of the peak rate at `step`: (1 − step/T)·min(1, step/W), zero past T."""
    decay = max(0.0, 1.0 - step / num_steps) if num_steps > 0 else 0.0
    warmup = min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0
    return decay * warmup


def scheduled_rate(peak: float, done: float, total: float, warmup: float, shape: str) -> float:
    """The learning rate once `done` of `total` is spent (steps, or a fraction of a budget of 1), in the
    schedule's `shape`, which the `optimizer` setting's value names:

    "electra": peak·electra_lr_factor(done, total, warmup). "adamw": linear warmup from 0 over
    `warmup`, then linear decay to 0 at `total`; for whole steps this is transformers'
    get_linear_schedule_with_warmup to the bit (tests/test_optim.py), which cannot serve pre-training's
    budget fractions nor ELECTRA's warmup-times-decay, hence one formula written here for both.
    """
    done = min(max(done, 0), total)
    if shape == "electra":
        return peak * electra_lr_factor(done, total, warmup)
    if done < warmup:
        return peak * done / warmup
    return peak * (total - done) / (total - warmup) if total > warmup else 0.0


def build_schedule(optimizer: torch.optim.Optimizer, num_steps: int, warmup_fraction: float,
                   shape: str = "electra") -> torch.optim.lr_scheduler.LambdaLR:
    """scheduled_rate per step, as a multiplier of each group's own rate: warmup over num_steps·
    warmup_fraction steps for "electra" (ELECTRA's, not rounded), over round(num_steps·warmup_fraction)
    for "adamw" (transformers')."""
    warmup = num_steps * warmup_fraction if shape == "electra" else round(num_steps * warmup_fraction)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: scheduled_rate(1.0, step, num_steps, warmup, shape))


class ElectraAdam(torch.optim.Optimizer):
    """AdamWeightDecayOptimizer: Adam moments without bias correction, decoupled weight decay.

    Param groups take `lr`, `betas`, `eps` and `weight_decay` as torch's AdamW groups do, so
    `parameter_groups`' groups serve either optimiser.

    `compiled`: the update runs through torch.compile (Inductor fuses its foreach chain into a few
    kernels; on CUDA with `triton.cudagraphs`, so that it may be captured in a CUDA graph: not yet run on
    one), its learning rates held on the parameters' device as 0-d tensors, filled from the groups' `lr`
    before each step. A float rate would be a constant of the graph, and a schedule that changes it every
    step would recompile every step. The groups' `lr` stay floats, so schedules, checkpoints and logs see
    what they see eagerly. A change in which parameters have gradients (two-stage's switch) compiles once
    more; every ElectraAdam in a process shares dynamo's cache of `_update` and its recompile limit.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.0, compiled: bool = False):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"bad ElectraAdam settings: lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self._set_up(compiled)

    def _set_up(self, compiled: bool) -> None:
        self.compiled = compiled
        self._update = _update
        self._held_rates: list[torch.Tensor] = []  # a 0-d tensor per group, where compiled

    def __getstate__(self) -> dict:
        """torch's Optimizer pickles its defaults, groups and state; a copy is compiled as this one is."""
        return super().__getstate__() | {"compiled": self.compiled}

    def __setstate__(self, state: dict) -> None:
        """A copy's or an unpickling's set-up; torch's load_state_dict also calls this, with no "compiled",
        and keeps this optimiser's."""
        compiled = state.pop("compiled", None)
        super().__setstate__(state)
        if compiled is not None or not hasattr(self, "compiled"):
            self._set_up(bool(compiled))

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, then a compiled update's moments marked static, as those it creates are."""
        super().load_state_dict(state_dict)
        if self.compiled:
            for state in self.state.values():
                _static(state["exp_avg"])
                _static(state["exp_avg_sq"])

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient, all groups in one pass of foreach kernels:
        a fine-tuning model's ~28 layer-wise groups cost no more launches than one (on a GPU the step
        is bound by launches, not arithmetic)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.compiled:
            self._hold_rates()
        for (beta1, beta2, eps), bucket in self._buckets().items():
            on_cpu = not self.compiled and bucket["params"][0].device.type == "cpu"
            for piece in _pieces(bucket, CPU_PIECE) if on_cpu else (bucket,):
                self._update(piece["params"], piece["grads"], piece["means"], piece["squares"],
                             piece["rates"], beta1, beta2, eps, piece["decays"])
        return loss

    def _hold_rates(self) -> None:
        """The groups' rates into their tensors on the device: a fill each (a launch, no host sync)."""
        if len(self._held_rates) != len(self.param_groups):  # the first step, or a group added since
            device = self.param_groups[0]["params"][0].device
            # static: a CUDA graph reads them where they are, not from a copy
            self._held_rates = [_static(torch.zeros((), device=device)) for _ in self.param_groups]
            # Inductor's kernels for this optimiser's devices; CUDA graphs on CUDA
            self._update = torch.compile(_update, options={"triton.cudagraphs": device.type == "cuda"})
        for held, group in zip(self._held_rates, self.param_groups, strict=True):
            held.fill_(group["lr"])

    def _buckets(self) -> dict[tuple[float, float, float], dict]:
        """Parameters with a gradient, their state, their group's rate and weight decay, by (betas, eps)."""
        buckets: dict[tuple[float, float, float], dict] = {}
        for index, group in enumerate(self.param_groups):
            rate = self._held_rates[index] if self.compiled else group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    if self.compiled:
                        _static(state["exp_avg"])
                        _static(state["exp_avg_sq"])
                bucket = buckets.setdefault((*group["betas"], group["eps"]), _new_bucket())
                if group["weight_decay"]:
                    bucket["decays"].setdefault(group["weight_decay"], []).append(len(bucket["params"]))
                bucket["params"].append(p)
                bucket["grads"].append(p.grad)
                bucket["means"].append(state["exp_avg"])
                bucket["squares"].append(state["exp_avg_sq"])
                bucket["rates"].append(rate)
        return buckets


# Elements of the weights a CPU updates at a time: 1 MiB of fp32 from each of the four tensors, which
# stays in cache across the update's ten passes (reports/results/performance.md, "ELECTRA's Adam on a CPU").
CPU_PIECE = 2 ** 18


def _pieces(bucket: dict, size: int) -> Iterator[dict]:
    """The bucket cut into buckets of at most `size` elements (a large parameter in slices, small ones
    together), each slice with its gradient's and moments' slices, its rate and its weight decay.

    On a CPU, foreach ops are one op per tensor, so each of the update's ten passes sweeps the whole
    model through memory before the next starts; piece by piece, the later passes find their piece in
    cache. Every element still goes through the same operations in the same order: the same bits. A
    tensor that is not contiguous (none of a transformers model's) goes whole: a flat view of it would
    be a copy, and the update would be lost."""
    decay_of = {i: decay for decay, indices in bucket["decays"].items() for i in indices}
    piece, count = _new_bucket(), 0
    for i, param in enumerate(bucket["params"]):
        tensors = (param, bucket["grads"][i], bucket["means"][i], bucket["squares"][i])
        total = param.numel()
        whole = total <= size or not all(t.is_contiguous() for t in tensors)
        flat = tensors if whole else tuple(t.view(-1) for t in tensors)
        for start in range(0, total, max(total, 1) if whole else size):
            views = flat if whole else tuple(t[start:start + size] for t in flat)
            if count and count + views[0].numel() > size:
                yield piece
                piece, count = _new_bucket(), 0
            decay = decay_of.get(i)
            if decay is not None:
                piece["decays"].setdefault(decay, []).append(len(piece["params"]))
            for key, view in zip(("params", "grads", "means", "squares"), views, strict=True):
                piece[key].append(view)
            piece["rates"].append(bucket["rates"][i])
            count += views[0].numel()
    if count:
        yield piece


def _new_bucket() -> dict:
    return {"params": [], "grads": [], "means": [], "squares": [], "rates": [], "decays": {}}


def _update(params: list[torch.Tensor], grads: list[torch.Tensor], means: list[torch.Tensor],
            squares: list[torch.Tensor], rates: list[float] | list[torch.Tensor], beta1: float, beta2: float,
            eps: float, decays: dict[float, list[int]]) -> None:
    """One bucket's update in place (the module docstring's), a rate per parameter: floats eagerly, 0-d
    tensors compiled (a list of 0-d tensors takes foreach's slow path, a kernel per parameter, eagerly)."""
    torch._foreach_mul_(means, beta1)
    torch._foreach_add_(means, grads, alpha=1 - beta1)
    torch._foreach_mul_(squares, beta2)
    torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
    denominators = torch._foreach_sqrt(squares)
    torch._foreach_add_(denominators, eps)
    updates = torch._foreach_div(means, denominators)
    for decay, indices in decays.items():  # one call per distinct weight decay
        torch._foreach_add_([updates[i] for i in indices], [params[i] for i in indices], alpha=decay)
    if rates and isinstance(rates[0], torch.Tensor):
        torch._foreach_mul_(updates, rates)  # param − rate·update, as param + (−rate)·update: the same bits
        torch._foreach_sub_(params, updates)
    else:
        torch._foreach_mul_(updates, [-rate for rate in rates])
        torch._foreach_add_(params, updates)


def _static(tensor: torch.Tensor) -> torch.Tensor:
    """Mark a tensor the compiled update reads or changes in place as staying at its address (torch's own
    compiled optimisers mark their state so): a CUDA graph may then use it where it is rather than copy it
    in or skip capture. Unguarded: a tensor at another address (a new optimiser's) re-records the graph
    rather than recompiling. Gradients are not marked: they come out of a compiled backward's graph, or,
    with the model eager or under DDP, are copied in at each replay."""
    import torch._dynamo  # with torch.compile only

    torch._dynamo.mark_static_address(tensor)
    return tensor
