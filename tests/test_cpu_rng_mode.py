"""The CUDA output comparison draws seeded random values on the CPU generator."""

import torch

from fixture_runner import cpu_rng_mode


def test_random_factory_on_another_device_draws_the_cpu_numbers_and_moves_them():
    torch.manual_seed(0)
    expected = torch.randn(4, 3)
    torch.manual_seed(0)
    with cpu_rng_mode(("meta",)):
        got = torch.randn(4, 3, device="meta")  # stands in for cuda: not the CPU
        torch.manual_seed(0)
        again = torch.randn(4, 3, device="cpu")
    assert got.device.type == "meta" and got.shape == expected.shape
    assert torch.equal(again, expected)


def test_like_factory_keeps_the_input_device():
    with cpu_rng_mode(("meta",)):
        out = torch.rand_like(torch.empty(2, 2, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 2)


def test_a_draw_that_requires_grad_is_still_a_leaf():
    # seen on an H100: randn(3, requires_grad=True, device=cuda) drawn on the CPU and moved
    # was a non-leaf, and torch.optim.Adam([w]) refused it
    with cpu_rng_mode(("meta",)):
        w = torch.randn(3, requires_grad=True, device="meta")
        v = torch.rand_like(torch.empty(2, device="meta"), requires_grad=True)
        plain = torch.randn(3, device="meta")
    assert w.is_leaf and w.requires_grad and w.device.type == "meta"
    assert v.is_leaf and v.requires_grad
    assert plain.is_leaf and not plain.requires_grad
    torch.optim.SGD([w, v], lr=0.1)  # raises for a non-leaf tensor


def test_other_ops_pass_through():
    with cpu_rng_mode(("meta",)):
        assert torch.equal(torch.ones(2) + 1, torch.full((2,), 2.0))


def test_only_the_named_device_types_are_redirected():
    # seen on an H100: a fixture's draw on `meta` took numbers from the CPU generator in
    # the CUDA run only, so its later CPU draws printed other values than the CPU run
    torch.manual_seed(0)
    torch.randn(4, 3, device="meta")
    expected = torch.randn(2)
    torch.manual_seed(0)
    with cpu_rng_mode():  # cuda only
        torch.randn(4, 3, device="meta")
        got = torch.randn(2)
    assert torch.equal(got, expected)
