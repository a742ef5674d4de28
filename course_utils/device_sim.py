"""A simulated GPU on the CPU: a lesson runs as if `pick_device()` had chosen CUDA, and every fault a real
GPU would raise is raised here too, naming the operation.

CI has no GPU, yet a lesson that mixes a host tensor with a device tensor, hands a CPU generator to
a sampler on the GPU, or differentiates a cuDNN RNN in eval mode crashes for every student who has
one. With ``COURSE_DEVICE=sim`` (or inside ``with simulated_gpu():``) `pick_device()` returns
``torch.device("cuda")`` and a torch function mode keeps track of placement:

* a tensor is *on the device* when it was made with ``device=`` the GPU, moved there (``.to``,
  ``.cuda``, a module's ``.to``), or computed from a tensor on the device; everything else is on the
  host. The data stays in CPU memory, and a move between the sides copies it, as a real move does (code
  that changes the moved tensor and reads the original sees what it would see on a GPU). ``tensor.device`` and ``is_cuda`` answer
  as they would on the GPU, so code that reads a tensor's device to place new work behaves as there.
* an operation that mixes a device tensor with a host tensor of one or more dimensions raises
  CUDA's "Expected all tensors to be on the same device" (a 0-dim host tensor is allowed, as on
  CUDA; so are copies between the two, indexing with host indices, and ``.to``);
* a generator made for one side and used by an operation on the other raises CUDA's
  "Expected a 'cuda' device type for generator";
* ``.numpy()`` (and so ``np.asarray``, matplotlib) on a device tensor raises CUDA's TypeError;
* a float64 tensor on the device raises, as on Apple's MPS, which has no float64 (the course runs
  there too: compute in float32 on the device, or in float64 on the CPU);
* the backward pass of a GRU, LSTM or RNN run in eval mode on the device raises cuDNN's
  "cudnn RNN backward can only be called in training mode" (unless cuDNN is switched off, as with
  ``torch.backends.cudnn.flags(enabled=False)``).

It is a guard, not an emulator: numbers are the CPU's, and timings mean nothing.
"""
import contextlib
import warnings

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode
from .ambient import AMBIENT

__all__ = ["SIMULATED", "simulated_gpu", "is_simulating", "install"]

SIMULATED = torch.device("cuda", 0)
HOST = torch.device("cpu")
_MARK = "_course_on_simulated_gpu"
_RNNS = {torch.gru, torch.lstm, torch.rnn_tanh, torch.rnn_relu}
# operations that may take a host tensor beside a device tensor on a real GPU
# (moves and attribute reads are handled before this check: `_move`, `_attribute`)
_MIXING_ALLOWED = {"copy_", "__setitem__", "__getitem__", "index_put_", "index_put", "new_tensor", "new_zeros",
                   "new_ones", "new_empty", "new_full", "__repr__", "__format__", "_has_compatible_shallow_copy_type",
                   "set_", "tolist", "item", "numel", "size", "dim", "__len__"}
_installed = []  # the context install() entered, kept alive (a collected generator would exit it)


def _tensors(args, kwargs):
    """The tensors among the arguments, one level into lists and tuples (where torch functions take them)."""
    found = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(x for x in a if isinstance(x, torch.Tensor))
    return found


def _on(t):
    return isinstance(t, torch.Tensor) and getattr(t, _MARK, False)


def _mark(t, on=True):
    if isinstance(t, torch.Tensor):
        setattr(t, _MARK, on)
    return t


def _is_gpu(device):
    if device is None:
        return None
    if isinstance(device, int):
        return True
    return torch.device(device).type == "cuda"


class _AnyGenerator(type(torch._C.Generator)):
    """SimulatedGenerator's metaclass: every torch generator is an instance, every generator class a subclass, so
    that `torch.Generator` standing for SimulatedGenerator while the simulation is on changes no `isinstance`
    check (a generator made before the simulation, or by torch itself, still is a torch.Generator)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, torch._C.Generator)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, torch._C.Generator)


class SimulatedGenerator(torch._C.Generator, metaclass=_AnyGenerator):
    """`torch.Generator(device=...)` under the simulation: a CPU generator that knows which side it is for."""

    def __new__(cls, device="cpu"):
        return super().__new__(cls)

    def __init__(self, device="cpu"):
        super().__init__()
        self.for_gpu = bool(_is_gpu(device))

    @property
    def device(self):
        return SIMULATED if self.for_gpu else HOST


def _descriptor(func):
    """For an attribute read or write, ('device', '__get__'); otherwise (None, None)."""
    owner = getattr(func, "__self__", None)
    if type(owner).__name__ == "getset_descriptor":
        return owner.__name__, func.__name__
    return None, None


def _raise_cudnn_eval(_grad):
    raise RuntimeError("cudnn RNN backward can only be called in training mode (simulated GPU: call "
                       "model.train() before differentiating through a GRU/LSTM/RNN on CUDA, or set "
                       "torch.backends.cudnn.enabled = False around it)")


def _rnn_in_eval(func, args):
    if func not in _RNNS:
        return False
    first_bool = next((i for i, a in enumerate(args) if isinstance(a, bool)), None)
    return first_bool is not None and len(args) > first_bool + 3 and args[first_bool + 3] is False


def _refuse_float64(t, name):
    if isinstance(t, torch.Tensor) and t.dtype in (torch.float64, torch.complex128):
        raise TypeError(f"Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support "
                        f"float64 (simulated GPU, in {name}: the course runs on Apple's MPS too; compute in "
                        f"float32 on the device, or in float64 on the CPU)")


def _check_generator(name, generator, on_gpu):
    if generator is None:
        return
    gen_gpu = bool(getattr(generator, "for_gpu", False))  # a generator made outside the simulation is the CPU's
    if gen_gpu != on_gpu:
        want, got = ("cuda", "cpu") if on_gpu else ("cpu", "cuda")
        raise RuntimeError(f"Expected a '{want}' device type for generator but found '{got}' "
                           f"(simulated GPU, in {name}: make the generator with "
                           f"torch.Generator(device=tensor.device))")


class _Placement(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in ("__get__", "__set__"):
            attr, access = _descriptor(func)
            if attr is not None:
                return self._attribute(func, attr, access, args, kwargs)
        if name in ("numpy", "__array__") and _on(args[0]):
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first. (simulated GPU)")
        if name in ("to", "cuda", "cpu", "type_as") and args and isinstance(args[0], torch.Tensor):
            return self._move(func, name, args, kwargs)

        tensors = _tensors(args, kwargs)
        from_device = any(_on(t) for t in tensors)
        if "device" not in kwargs and "generator" not in kwargs and not from_device:
            return func(*args, **kwargs)                     # host work, the common case: nothing to check
        target = _is_gpu(kwargs.get("device"))
        if target is not None:
            kwargs = {**kwargs, "device": HOST}
        on_gpu = bool(target) or from_device
        if on_gpu and name not in _MIXING_ALLOWED:
            host = [t for t in tensors if not _on(t) and t.dim() > 0]
            if host and (target is None or from_device):
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, "
                    f"cuda:0 and cpu! (simulated GPU, in {name or func}: a host tensor of shape "
                    f"{tuple(host[0].shape)} met a tensor on the GPU; make it with device=... or .to(device))")
        _check_generator(name or str(func), kwargs.get("generator"), on_gpu)
        out = func(*args, **kwargs)
        if target and not from_device:  # made for the device from host data: a copy on a GPU, never an alias
            out = pytree.tree_map(lambda t: _copied(t, args, kwargs), out)
        if on_gpu and name not in ("copy_", "__setitem__", "tolist", "item"):
            for t in pytree.tree_leaves(out):
                _mark(t)
                _refuse_float64(t, name)
            if _rnn_in_eval(func, args) and torch.is_grad_enabled() and torch.backends.cudnn.enabled:
                for t in pytree.tree_leaves(out):
                    if isinstance(t, torch.Tensor) and t.requires_grad:
                        t.register_hook(_raise_cudnn_eval)
        return out

    def _attribute(self, func, attr, access, args, kwargs):
        if access == "__get__" and attr == "device" and _on(args[0]):
            return SIMULATED
        if access == "__get__" and attr == "is_cuda" and _on(args[0]):
            return True
        out = func(*args, **kwargs)
        if access == "__get__" and _on(args[0]):
            _mark(out)
        if access == "__set__" and attr == "data":
            _mark(args[0], _on(args[1]))
        return out

    def _move(self, func, name, args, kwargs):
        source = args[0]
        if name == "cuda":
            to_gpu = True
            out = source if _on(source) else source.clone()
        elif name == "cpu":
            to_gpu = False
            out = source.clone() if _on(source) else source
        elif name == "type_as":
            to_gpu = _on(args[1])
            out = func(*args, **kwargs)
        else:
            rest = list(args[1:])
            other = next((a for a in rest if isinstance(a, torch.Tensor)), kwargs.get("other"))
            device = kwargs.get("device", next((a for a in rest if isinstance(a, (str, torch.device, int))
                                                and not isinstance(a, bool)), None))
            to_gpu = _on(other) if other is not None else _is_gpu(device)
            if to_gpu is None:
                to_gpu = _on(source)
            rest = [HOST if isinstance(a, (str, torch.device)) or (isinstance(a, int) and not isinstance(a, bool))
                    else a for a in rest]
            if "device" in kwargs:
                kwargs = {**kwargs, "device": HOST}
            out = func(source, *rest, **kwargs)
        if out is source and to_gpu != _on(source):
            out = source.clone()  # a move between host and GPU copies, as on a GPU: changing one leaves the other
        if to_gpu:
            _refuse_float64(out, name)
        return _mark(out, to_gpu)


def _copied(out, args, kwargs):
    """`out`, cloned if it shares memory with a host argument (`as_tensor`/`asarray` of a tensor or an array
    return their input's memory on the CPU, where a GPU copies it)."""
    if not isinstance(out, torch.Tensor):
        return out
    pointer = out.untyped_storage().data_ptr()
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == pointer:
            return out.clone()
        if hasattr(a, "__array_interface__") and a.__array_interface__["data"][0] == out.data_ptr():
            return out.clone()
    return out


def is_simulating():
    """True while the simulated GPU is in force."""
    return bool(AMBIENT.simulated_gpu)


@contextlib.contextmanager
def simulated_gpu():
    """Run a block as if on a GPU: see the module's docstring."""
    mode = _Placement()
    # held here: a simulation left on by install() ends at interpreter exit, when module globals are None
    active, torch_module, real_generator = AMBIENT.simulated_gpu, torch, torch.Generator
    torch.Generator = SimulatedGenerator
    active.append(mode)
    try:
        with mode, warnings.catch_warnings():
            # nn.GRU sees tensors "on CUDA" and notes that this CPU build has no cuDNN
            warnings.filterwarnings("ignore", message="PyTorch was compiled without cuDNN")
            yield SIMULATED
    finally:
        active.remove(mode)
        torch_module.Generator = real_generator


def install():
    """Turn the simulation on for the rest of the process (``COURSE_DEVICE=sim``)."""
    if not AMBIENT.simulated_gpu:
        warnings.filterwarnings("ignore", message="PyTorch was compiled without cuDNN")
        context = simulated_gpu()
        context.__enter__()
        _installed.append(context)
    return SIMULATED
