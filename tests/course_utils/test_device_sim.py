"""course_utils.device_sim: the CPU playing a GPU raises each placement fault a real GPU raises, and lets
correct device code through (tests/lessons/test_device.py runs every lesson under it)."""
import numpy as np
import pytest
import torch
import torch.nn as nn

import course_utils as cu
from course_utils.device_sim import simulated_gpu


def raises_under_gpu(fn, match):
    with pytest.raises((RuntimeError, TypeError), match=match):
        with simulated_gpu() as device:
            fn(device)


def test_pick_device_plays_cuda_under_course_device_sim(monkeypatch):
    from course_utils import device_sim
    monkeypatch.setenv("COURSE_DEVICE", "sim")
    monkeypatch.setattr(device_sim, "_installed", [])
    try:
        assert cu.pick_device() == torch.device("cuda", 0)
        assert device_sim.is_simulating() and torch.ones(2, device=cu.pick_device()).device.type == "cuda"
    finally:
        for context in device_sim._installed:
            context.__exit__(None, None, None)
    assert not device_sim.is_simulating()


def test_a_host_tensor_meeting_a_device_tensor_raises_and_names_the_operation():
    raises_under_gpu(lambda d: torch.ones(3, device=d) + torch.ones(3), r"same device.*in add")


def test_host_ids_into_an_embedding_on_the_device_raise():
    """Lesson 05's crash: ids made on the CPU, the model on the device."""
    raises_under_gpu(lambda d: nn.Embedding(10, 4).to(d)(torch.tensor([1, 2])), "same device")


def test_a_module_built_on_the_host_and_fed_device_tensors_raises():
    """Lesson 05's second crash: MultiHeadAttention built on the CPU and never moved."""
    def run(d):
        x = torch.randn(1, 3, 8, device=d)
        nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x)
    raises_under_gpu(run, "same device")


def test_a_host_generator_for_sampling_on_the_device_raises():
    """Lesson 07's crash: torch.Generator() handed to torch.multinomial on device probabilities."""
    def run(d):
        probs = torch.softmax(torch.randn(2, 5, device=d), -1)
        torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(0))
    raises_under_gpu(run, "Expected a 'cuda' device type for generator")


def test_differentiating_an_rnn_in_eval_mode_on_the_device_raises_as_cudnn_does():
    """Lesson 01's crash: the gradient through a trained GRU left in eval mode."""
    def run(d):
        gru = nn.GRU(4, 5, batch_first=True).to(d).eval()
        out, _ = gru(torch.randn(2, 3, 4, device=d, requires_grad=True))
        out.sum().backward()
    raises_under_gpu(run, "cudnn RNN backward can only be called in training mode")


def test_numpy_of_a_device_tensor_raises():
    raises_under_gpu(lambda d: np.asarray(torch.ones(3, device=d)), "can't convert cuda")


def test_float64_on_the_device_raises_because_apple_mps_has_none():
    raises_under_gpu(lambda d: torch.arange(4, dtype=torch.float64, device=d), "float64")
    raises_under_gpu(lambda d: torch.ones(4, device=d).double(), "float64")


def test_correct_device_code_runs_and_reports_the_device():
    with simulated_gpu() as device:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Embedding(10, 8), nn.GRU(8, 8, batch_first=True))
        head = nn.Linear(8, 10)
        head.load_state_dict({k: v.clone() for k, v in head.state_dict().items()})   # host weights, then moved
        model, head = model.to(device), head.to(device)
        optimizer = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-2)
        gen = torch.Generator().manual_seed(1)
        for _ in range(3):
            ids = torch.randint(0, 10, (4, 6), generator=gen).to(device)
            out, _ = model(ids)
            loss = nn.functional.cross_entropy(head(out).flatten(0, 1), ids.flatten())
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        assert head.weight.device == device and head.weight.grad.device == device
        mask = torch.arange(6, device=ids.device) < 3                   # placed by reading a tensor's device
        picked = out[torch.tensor([0, 2])]                              # host indices are fine, as on CUDA
        assert (out * mask[None, :, None]).device == device and picked.device == device
        host = torch.zeros(4, 6, 8)
        host.copy_(out.detach())                                        # copies between the two are fine
        probs = torch.softmax(head(out[:, -1]), -1)
        tokens = torch.multinomial(probs, 1, generator=torch.Generator(device=probs.device).manual_seed(0))
        assert tokens.device == device and tokens.cpu().numpy().shape == (4, 1)
        assert loss.item() > 0 and torch.ones(2, device=device).tolist() == [1.0, 1.0]


def test_a_move_copies_as_on_a_gpu_so_changing_the_moved_tensor_leaves_the_original():
    """Code that relies on `.to(device)` having copied (it changes the copy in place and reads the original) runs
    as on a GPU; the simulator once aliased, so a move that forgot to copy back passed here and failed there."""
    x = torch.arange(4.0)
    with simulated_gpu():
        on_gpu = x.to("cuda")
        on_gpu.zero_()
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
        moved_back = on_gpu.cpu()
        moved_back.add_(7)
        assert on_gpu.sum().item() == 0
        assert on_gpu.cuda() is on_gpu  # already there: the same tensor, as on a GPU


def test_a_bug_only_aliasing_hides_fails_under_the_simulator():
    """A function that updates its device copy and returns the host tensor, believing the two are one (true only
    when the move aliases): on a GPU the result is unchanged, and so it is here."""
    def scale_in_place(x, device):
        x.to(device).mul_(2)  # the bug: the GPU copy is changed, the host tensor is not
        return x

    with simulated_gpu():
        assert scale_in_place(torch.ones(3), "cuda").tolist() == [1.0, 1.0, 1.0]


def test_a_generator_made_outside_the_simulation_is_still_a_torch_generator_inside_it():
    """`torch.Generator` stands for the simulator's class only while a simulation is on, and every torch generator
    is an instance of it: a generator made before the block passed `isinstance` outside and failed inside."""
    before = torch.Generator().manual_seed(0)
    with simulated_gpu():
        assert isinstance(before, torch.Generator) and issubclass(torch._C.Generator, torch.Generator)
        assert isinstance(torch.Generator(device="cuda"), torch.Generator)
        assert torch.randn(2, generator=before).shape == (2,)  # a CPU generator for host work, as on a GPU
    assert torch.Generator is torch._C.Generator


ROUTES = {
    "as_tensor": lambda x: torch.as_tensor(x, device="cuda"),
    "asarray": lambda x: torch.asarray(x, device="cuda"),
    "tensor": lambda x: torch.tensor(x, device="cuda"),
    "to": lambda x: x.to("cuda"),
    "to(device=)": lambda x: x.to(device="cuda"),
    "cuda": lambda x: x.cuda(),
    "empty_like + copy_": lambda x: torch.empty_like(x, device="cuda").copy_(x),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_to_the_device_copies_and_leaves_the_host_original_on_the_host(route):
    """On a GPU, a tensor brought to the device from the host is a copy: changing it leaves the original, which
    stays on the host. `as_tensor(x, device="cuda")` once returned x itself and marked it as on the device."""
    x = torch.arange(4.0)
    with simulated_gpu():
        on_gpu = ROUTES[route](x)
        on_gpu.mul_(2)
        assert on_gpu is not x and x.device.type == "cpu" and on_gpu.device.type == "cuda"
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_an_array_brought_to_the_device_is_copied():
    array = np.arange(3, dtype=np.float32)
    with simulated_gpu():
        torch.as_tensor(array, device="cuda").add_(1)
        torch.asarray(array, device="cuda").add_(1)
    assert array.tolist() == [0.0, 1.0, 2.0]
