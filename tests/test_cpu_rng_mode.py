"""The CUDA output comparison draws seeded random values on the CPU generator."""

import torch

from fixture_runner import cpu_rng_mode


def test_random_factory_on_another_device_draws_the_cpu_numbers_and_moves_them():
    torch.manual_seed(0)
    expected = torch.randn(4, 3)
    torch.manual_seed(0)
    with cpu_rng_mode():
        got = torch.randn(4, 3, device="meta")  # stands in for cuda: not the CPU
        torch.manual_seed(0)
        again = torch.randn(4, 3, device="cpu")
    assert got.device.type == "meta" and got.shape == expected.shape
    assert torch.equal(again, expected)


def test_like_factory_keeps_the_input_device():
    with cpu_rng_mode():
        out = torch.rand_like(torch.empty(2, 2, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 2)


def test_other_ops_pass_through():
    with cpu_rng_mode():
        assert torch.equal(torch.ones(2) + 1, torch.full((2,), 2.0))
