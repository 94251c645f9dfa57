"""tilegemm inside PyTorch: the differentiable operators (gradcheck in float64), patch(model) with
its counts, fallback to torch for what tilegemm does not serve, undo, torch.compile without a graph
break, and (on a GPU) a BF16 model against torch's own forward and gradients."""

from __future__ import annotations

import pytest

import tilegemm
from tilegemm.errors import AutogradError

torch = pytest.importorskip("torch")
from tilegemm import torchop  # noqa: E402  (registers torch.ops.tilegemm.*)


@pytest.mark.parametrize("xshape", [(5, 8), (4, 5, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradcheck(xshape, bias):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*xshape, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(6, 8, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, generator=g, requires_grad=True) if bias else None
    assert torch.autograd.gradcheck(lambda *t: torch.ops.tilegemm.linear(*t), (x, w, b) if bias else (x, w))


@pytest.mark.parametrize("wshape,bshape", [((6, 8), (1, 6)), ((6, 8), (5, 6)), ((6, 8), ()), ((8,), None)])
def test_linear_gradcheck_for_the_weights_and_biases_torch_takes(wshape, bshape):
    """nn.functional.linear takes a bias that broadcasts against its output ((1, N), (M, N)) and a
    1-D weight (x @ w, which the operator hands to torch): the backward gave such a bias an (N,)
    gradient, which autograd refused, and read a 1-D weight as (N, K); the fake gave its output an N."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 8, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(*wshape, dtype=torch.float64, generator=g, requires_grad=True)
    args = (x, w) if bshape is None else (x, w, torch.randn(bshape, dtype=torch.float64, generator=g,
                                                             requires_grad=True))
    assert torch.autograd.gradcheck(lambda *t: torch.ops.tilegemm.linear(*t), args)
    assert torchop._linear_fake(*args).shape == torch.nn.functional.linear(*args).shape
    layer = torch.nn.Linear(8, 6).double()  # a patched layer whose bias is kept as a row
    layer.bias = torch.nn.Parameter(torch.randn(1, 6, dtype=torch.float64, generator=g))
    want = torch.autograd.grad(layer(x).square().sum(), (x, layer.weight, layer.bias))
    with tilegemm.patch(layer):
        got = torch.autograd.grad(layer(x).square().sum(), (x, layer.weight, layer.bias))
    assert all(torch.allclose(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("bshape", [(1, 6), (6,), ()])
def test_linear_of_a_1d_x_takes_the_biases_torch_takes(bshape):
    """nn.functional.linear of a 1-D x adds the bias to its one row: a (1, N) bias is taken, and
    the output is still (N,). The operator added it in place to the (N,) output
    (RuntimeError: the broadcast shape is (1, N)), and the backward summed grad, (N,), to (1, N)."""
    g = torch.Generator().manual_seed(4)
    x, w, b = (torch.randn(s, dtype=torch.float64, generator=g, requires_grad=True) for s in ((8,), (6, 8), bshape))
    assert torch.ops.tilegemm.linear(x, w, b).shape == torchop._linear_fake(x, w, b).shape \
        == torch.nn.functional.linear(x, w, b).shape
    assert torch.autograd.gradcheck(lambda *t: torch.ops.tilegemm.linear(*t), (x, w, b))


@pytest.mark.parametrize("sa,sb", [((5, 4), (4, 3)), ((3, 5, 4), (4, 2)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 3)),
                                   ((3, 5, 4), (4,)), ((4,), (4,))])
def test_matmul_gradcheck(sa, sb):
    """tilegemm.matmul on tensors that require grad records its own backward (tilegemm's GEMMs),
    broadcast batches and promoted 1-D operands included."""
    g = torch.Generator().manual_seed(2)
    a = torch.randn(*sa, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(*sb, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(tilegemm.matmul, (a, b))
    assert "tilegemm" in type(tilegemm.matmul(a, b).grad_fn).__name__
    with torch.no_grad():
        assert tilegemm.matmul(a, b).grad_fn is None
    with pytest.raises(AutogradError, match="out="):
        tilegemm.matmul(a, b, out=torch.empty(torch.matmul(a, b).shape, dtype=torch.float64))


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 4, bias=False)
        self.register_buffer("proj", torch.randn(4, 2))

    def forward(self, x):
        return self.down(torch.relu(self.up(x))) @ self.proj


class _Own(torch.nn.Linear):  # a layer with a forward of its own: patch leaves it as it is
    def forward(self, t):
        return super().forward(t)


def test_patch_counts_falls_back_and_undoes():
    torch.manual_seed(0)
    m = _Tiny()
    x = torch.randn(3, 5, 8)
    ref = m(x)
    with tilegemm.patch(m) as p:
        assert torch.allclose(m(x), ref, rtol=1e-5, atol=1e-6)
        assert p.counts == {"tilegemm": 2, "torch": 0}  # two Linear layers; the @ is left to torch
    assert type(m.up) is torch.nn.Linear and "forward" not in vars(m.up)  # undone on exit: its class back
    with tilegemm.patch(m, matmul=True) as p:
        assert torch.allclose(m(x), ref, rtol=1e-5, atol=1e-6)
        assert p.counts == {"tilegemm": 3, "torch": 0}  # and the @
        mb = _Tiny().to(torch.bfloat16)  # BF16 on the host: no tilegemm kernel serves it, torch does
        with tilegemm.patch(mb) as q:
            mb(x.bfloat16())
            assert q.counts == {"tilegemm": 0, "torch": 2}
    p = tilegemm.patch(m)
    m(x)
    p.undo()
    before = dict(torchop.COUNTS)
    m(x)
    assert torchop.COUNTS == before  # unpatched: nothing counted
    with pytest.raises(TypeError, match="torch.nn.Module"):
        tilegemm.patch(object())


def test_with_matmul_a_layers_own_path_runs_outside_the_mode(monkeypatch):
    """With matmul=True the model's forward runs in the patch's torch function mode; the patched
    layer's own path (its shapes, strides, pointers and allocations: dozens of tensor accesses)
    went through the mode's Python too, at three times the layer's cost. It runs with torch
    functions off now, where its tensors are plain ones; a subclass's still meet the mode."""
    seen = []
    mode_call = torchop._MatmulMode.__torch_function__

    def counted(self, func, types, args=(), kwargs=None):
        seen.append(func)
        return mode_call(self, func, types, args, kwargs)

    monkeypatch.setattr(torchop._MatmulMode, "__torch_function__", counted)

    class Sub(torch.Tensor):
        pass

    class One(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.lin(x)

    torch.manual_seed(0)
    m, x = One(), torch.randn(3, 8)
    ref = m(x)
    with torch.no_grad(), tilegemm.patch(m, matmul=True) as p:
        assert torch.allclose(m(x), ref, rtol=1e-5, atol=1e-6) and p.counts == {"tilegemm": 1, "torch": 0}
        assert seen == []
        got = m(x.as_subclass(Sub))  # a subclass: its rules, in the mode, on torch
        assert seen and p.counts == {"tilegemm": 1, "torch": 1}
    torch.testing.assert_close(got.as_subclass(torch.Tensor), ref)

    class Mine(torch.overrides.TorchFunctionMode):  # a mode of the caller's sees the layer's path as before
        def __torch_function__(self, func, types, args=(), kwargs=None):
            mine.append(func)
            return func(*args, **(kwargs or {}))

    mine = []
    with torch.no_grad(), tilegemm.patch(m, matmul=True), Mine():
        m(x)
    assert mine
    mine.clear()
    with torch.no_grad(), tilegemm.patch(m, matmul=True), Mine():
        m.lin(x)  # the layer called alone: the patch's mode is not entered, the caller's is the one there
    assert mine


def test_patched_gradients_match_torch():
    torch.manual_seed(0)
    m = _Tiny().double()
    x = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    m(x).square().sum().backward()
    want = [t.grad.clone() for t in (x, m.up.weight, m.up.bias, m.down.weight)]
    for t in (x, m.up.weight, m.up.bias, m.down.weight):
        t.grad = None
    before = torchop.COUNTS["tilegemm"]
    with tilegemm.patch(m, matmul=True) as p:
        m(x).square().sum().backward()
        assert p.counts == {"tilegemm": 3, "torch": 0}  # the forward's products
        assert torchop.COUNTS["tilegemm"] - before >= 4  # the operators' outside the patch: the backward's products
    for t, w in zip((x, m.up.weight, m.up.bias, m.down.weight), want):
        assert torch.allclose(t.grad, w, rtol=1e-10, atol=1e-12)


def test_compile_traces_the_operators_without_a_graph_break():
    torch.manual_seed(0)
    m = _Tiny()
    x = torch.randn(3, 5, 8)
    ref = m(x)
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)  # fullgraph: a graph break is an error
    with tilegemm.patch(m, matmul=False) as p:
        y = compiled(x)
        assert torch.allclose(y, ref, rtol=1e-5, atol=1e-6) and p.counts["tilegemm"] == 2
        y.sum().backward()
        assert m.up.weight.grad is not None


class _Bmm(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b) @ b.transpose(-1, -2)


def test_a_dynamic_batch_dimension_stays_dynamic_through_the_matmul_operator():
    """The matmul operator's fake broadcasts the batch dimensions by torch's rules, which keep a
    symbolic size: NumPy's made it an int, so torch.export refused a dynamic batch dimension and
    torch.compile compiled a patched model again for each batch size."""
    from torch.export import Dim

    m, a, b = _Bmm(), torch.randn(2, 5, 8), torch.randn(2, 8, 3)
    batch = Dim("batch", min=2, max=64)
    with tilegemm.patch(m, matmul=True):
        ep = torch.export.export(m, (a, b), dynamic_shapes=({0: batch}, {0: batch}))
    assert any(n.target is torch.ops.tilegemm.matmul.default for n in ep.graph.nodes)
    a3, b3 = torch.randn(3, 5, 8), torch.randn(3, 8, 3)
    torch.testing.assert_close(ep.module()(a3, b3), m(a3, b3))
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="eager", dynamic=True)
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with tilegemm.patch(m, matmul=True) as p:
        for n in (2, 3, 4, 5):
            torch.testing.assert_close(compiled(torch.randn(n, 5, 8), torch.randn(n, 8, 3)).shape, (n, 5, 8))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - frames == 1 and p.counts["tilegemm"] == 8
    with pytest.raises(tilegemm.ShapeError, match="do not broadcast"):
        torchop._matmul_fake(torch.empty(2, 5, 8, device="meta"), torch.empty(3, 8, 3, device="meta"))


def test_scripting_a_patched_layer_is_refused_in_words():
    """torch.jit.script of a patched model: one TypeError that says why and what to do (it was
    TorchScript's "try blocks aren't supported", pointing into tilegemm); after undo it scripts."""
    m = _Tiny()
    with tilegemm.patch(m):
        with pytest.raises(TypeError, match="script the model after undo"):
            torch.jit.script(m)
        assert type(m.up) is not torch.nn.Linear  # still patched: the refusal changed nothing
    x = torch.randn(3, 8)
    torch.testing.assert_close(torch.jit.script(m)(x), m(x))


def test_patch_leaves_a_forward_set_on_a_layer_as_it_is():
    """A hook library (accelerate) replaces a layer's forward on the instance: patch keeps it (the
    layer runs on torch, uncounted), and undo does not remove it."""
    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 8)
    ran, inner = [], m.up.forward
    m.up.forward = lambda t: ran.append(1) or inner(t)
    with tilegemm.patch(m) as p:
        m(x)
    assert ran == [1] and p.counts == {"tilegemm": 1, "torch": 0}
    assert "forward" in vars(m.up) and type(m.down) is torch.nn.Linear


def test_patches_nest_each_undoing_its_own():
    """A layer patched already stays its patch's: a second patch neither routes nor undoes it."""
    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 8)
    with tilegemm.patch(m.up) as outer:
        with tilegemm.patch(m) as inner:
            m(x)
        assert type(m.up) is not torch.nn.Linear and type(m.down) is torch.nn.Linear  # inner undid only m.down
        m(x)
    assert type(m.up) is torch.nn.Linear
    assert outer.counts == {"tilegemm": 2, "torch": 0} and inner.counts == {"tilegemm": 1, "torch": 0}


def test_counts_are_the_models_own_and_stop_at_undo():
    torch.manual_seed(0)
    m, other, x = _Tiny(), _Tiny(), torch.randn(3, 8)
    p = tilegemm.patch(m)
    with tilegemm.patch(other):
        other(x)
    m(x)
    with pytest.raises(RuntimeError):  # a product that fails is not counted
        m(torch.randn(3, 7))
    p.undo()
    with tilegemm.patch(other):
        other(x)
    m(x)
    assert p.counts == {"tilegemm": 2, "torch": 0}


def test_copies_of_a_patched_model_are_the_model_as_it_was():
    """deepcopy, pickle and torch.save of a patched model give it unpatched (loading needs no
    tilegemm); a model patched with matmul=True holds the patch's hooks, so a copy is refused in one
    line until undo."""
    import copy
    import io
    import pickle

    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 8)
    m.own = _Own(4, 4)
    want = m(x)
    with tilegemm.patch(m) as p:
        buf = io.BytesIO()
        torch.save(m, buf)
        copies = [copy.deepcopy(m), pickle.loads(pickle.dumps(m)), torch.load(io.BytesIO(buf.getvalue()),
                                                                            weights_only=False)]
    assert b"tilegemm" not in buf.getvalue()
    for c in copies:
        assert type(c.up) is torch.nn.Linear and type(c.down) is torch.nn.Linear
        assert torch.equal(c(x), want)
    assert p.counts == {"tilegemm": 0, "torch": 0}
    with tilegemm.patch(m, matmul=True):
        for copier in (copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="after undo"):
                copier(m)
    pickle.dumps(m)


@pytest.mark.parametrize("matmul", [False, True])
def test_patching_a_compiled_model_again_compiles_nothing_again(matmul):
    """Each patch made new classes and a new tag, on which torch.compile guards: every patch of a
    compiled model compiled it again, and past dynamo's recompile limit (8) it ran uncompiled,
    silently. A patch of a model takes its last patch's classes and tag once that is undone; its
    counts are its own, and the earlier patch's stay as they were at its undo."""
    import torch._dynamo

    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 8)
    want = m(x)
    compiled = torch.compile(m, backend="aot_eager")
    done = []
    with torch.no_grad():
        for i in range(4):
            with torch._dynamo.config.patch(error_on_recompile=i > 0), tilegemm.patch(m, matmul=matmul) as p:
                assert torch.allclose(compiled(x), want, rtol=1e-5, atol=1e-6)
                with tilegemm.patch(m) as inner:  # a patch inside it: the layers stay the outer's
                    assert inner.layers == []
            assert torch.allclose(compiled(x), want, rtol=1e-5, atol=1e-6)  # unpatched: torch's
            done.append(p)
    assert all(q.counts == {"tilegemm": 2 + matmul, "torch": 0} for q in done), [q.counts for q in done]
    assert type(m.up) is torch.nn.Linear


def test_a_patch_and_its_undo_write_each_layers_dict():
    """torch.compile guards a layer's class beneath its instance dict, and torch 2.11 (the GPU
    machines' image) skips those guards while the dict's version tag is unchanged: a class
    assignment leaves it alone, so a model compiled unpatched and patched after ran torch's graph,
    uncounted (the test above, on 2.11: counts 0 after the first patch). Patch and undo write the
    dict (torchop._retype); a dict that records its writes shows it on any torch."""

    class Watched(dict):
        def __setitem__(self, k, v):
            writes.append(k)
            super().__setitem__(k, v)

    m = _Tiny()
    for layer in (m.up, m.down):
        layer.__dict__ = Watched(layer.__dict__)
    writes = []
    p = tilegemm.patch(m)
    assert type(m.up) is not torch.nn.Linear and writes.count("_tilegemm_retyped") == 2
    p.undo()
    assert type(m.up) is torch.nn.Linear and writes.count("_tilegemm_retyped") == 4
    assert "_tilegemm_retyped" not in vars(m.up)


def test_a_patch_inside_a_live_one_never_takes_its_tag():
    """A model patched again after undo takes its last patch's tag; one patched while a patch of it
    is still on must not (a model with no Linear to patch, matmul=True: the second took the first's
    tag, and the first's products were counted as the second's, then as nobody's)."""

    class AtOnly(torch.nn.Module):
        def forward(self, x):
            return x @ x.t()

    m, x = AtOnly(), torch.randn(3, 3)
    with torch.no_grad():
        p1 = tilegemm.patch(m, matmul=True)
        p2 = tilegemm.patch(m, matmul=True)
        assert p2._tag != p1._tag
        p2.undo()
        m(x)
        assert p1.counts == {"tilegemm": 1, "torch": 0}
        p1.undo()
        p3 = tilegemm.patch(m, matmul=True)
        assert p3._tag == p1._tag  # all undone: taken again
        p3.undo()


def test_autocast_casts_the_operands_as_torch_does():
    """Under autocast a patched layer gets its operands in the autocast dtype (here BF16 on the
    host, which torch runs), as nn.functional.linear does: the same dtype and values as torch's."""
    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = m(x)
        with tilegemm.patch(m, matmul=True) as p:
            got = m(x)
    assert got.dtype is want.dtype is torch.bfloat16 and torch.equal(got, want)
    assert p.counts == {"tilegemm": 0, "torch": 3}


def test_autocast_cast_of_a_parameter_is_its_value_in_the_dtype():
    """A parameter's cast (on the host made here; on CUDA autocast's own, through einsum's
    identity: the GPU test): the values of .to(dtype), the parameter untouched, gradients to it."""
    w = torch.nn.Parameter(torch.randn(8, 4))
    before = w.detach().clone()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = torchop._cast(w, torch.bfloat16)
    assert got.dtype is torch.bfloat16 and torch.equal(got, before.to(torch.bfloat16)) and torch.equal(w, before)
    got.float().sum().backward()
    assert torch.equal(w.grad, torch.ones_like(w))
    frozen = torch.randn(8, 4)  # (not a parameter: cast as it is)
    assert torch.equal(torchop._cast(frozen, torch.float16), frozen.half())


def test_compiled_patched_model_under_autocast_is_one_graph():
    """The cast through einsum's identity is eager-only (dynamo cannot trace torch._VF's functions:
    a compiled, patched model under autocast raised Unsupported with fullgraph=True)."""
    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 8)
    torch._dynamo.reset()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = m(x)
        with tilegemm.patch(m):
            got = torch.compile(m, fullgraph=True)(x)
    assert got.dtype is want.dtype is torch.bfloat16 and torch.equal(got, want)


def test_a_lazy_layer_before_its_first_call_runs_on_torch():
    """LazyLinear's first call makes it a Linear (its class replaced): patched before then, it ran
    into the patch's forward without the patch's attributes (AttributeError)."""
    torch.manual_seed(0)
    m, x = torch.nn.Sequential(torch.nn.LazyLinear(4)), torch.randn(3, 8)
    with tilegemm.patch(m) as p:
        got = m(x)
    assert torch.equal(got, m(x)) and p.counts == {"tilegemm": 0, "torch": 0}


def test_forward_mode_ad_keeps_the_tangent():
    """Dual tensors (torch.autograd.forward_ad) run on torch, which carries their tangents: the
    direct path dropped the tangent, and the operator has no jvp (NotImplementedError)."""
    import torch.autograd.forward_ad as fwAD

    torch.manual_seed(0)
    m, x, t = _Tiny(), torch.randn(3, 8), torch.randn(3, 8)
    for grad in (False, True):
        with torch.set_grad_enabled(grad), fwAD.dual_level():
            want = fwAD.unpack_dual(m(fwAD.make_dual(x, t)))
            with tilegemm.patch(m, matmul=True):
                got = fwAD.unpack_dual(m(fwAD.make_dual(x, t)))
        assert got.tangent is not None and torch.allclose(got.tangent, want.tangent)
        assert torch.allclose(got.primal, want.primal)


def test_nested_tensors_run_on_torch():
    """A jagged nested tensor (a subclass) that needs a gradient goes to torch, not to the operator,
    which has no rule for it; a strided nested tensor (plain class) is torch's too."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4)
    parts = [torch.randn(2, 8), torch.randn(3, 8)]
    for layout in (torch.jagged, torch.strided):
        x = torch.nested.nested_tensor(parts, layout=layout)
        for grad in (True, False):
            with torch.set_grad_enabled(grad):
                want = lin(x)
                with tilegemm.patch(lin) as p:
                    got = lin(x)
            assert all(torch.equal(g, w) for g, w in zip(got.unbind(), want.unbind())) and p.counts["tilegemm"] == 0


@pytest.mark.parametrize("matmul", [False, True])
def test_a_sparse_activation_is_differentiated_by_torch(matmul):
    """A sparse activation runs on torch, and so does its gradient: the operator's backward took the
    activation's rows (RuntimeError: reshape is not implemented for sparse tensors)."""
    torch.manual_seed(0)
    m = torch.nn.Linear(6, 3).double()
    x = torch.randn(4, 6, dtype=torch.float64).relu().to_sparse().requires_grad_()
    want = m(x)
    want_grads = torch.autograd.grad(want.sum(), (x, m.weight, m.bias))
    with tilegemm.patch(m, matmul=matmul) as p:
        got = m(x)
        got_grads = torch.autograd.grad(got.sum(), (x, m.weight, m.bias))
    torch.testing.assert_close(got, want)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g.to_dense(), w.to_dense())
    assert p.counts == {"tilegemm": 0, "torch": 1}


def test_a_bias_of_another_dtype_is_torchs_error():
    """torch refuses a float64 bias on a float32 layer; added after the product it was promoted."""
    lin, x = torch.nn.Linear(8, 4), torch.randn(3, 8)
    lin.bias.data = lin.bias.data.double()
    with pytest.raises(RuntimeError) as want:
        lin(x)
    for grad in (True, False):
        with torch.set_grad_enabled(grad), tilegemm.patch(lin), pytest.raises(RuntimeError) as got:
            lin(x)
        assert str(got.value) == str(want.value)


def test_a_pre_hook_that_raises_leaves_the_callers_mode():
    """With matmul=True the patch's mode is left after the forward even when a pre-hook raised;
    a pre-hook that runs before the patch's own (prepended, or global) raised before it was
    entered, and leaving popped the caller's mode instead (and hid the error)."""
    class Mine(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    m = torch.nn.Sequential(torch.nn.Linear(8, 4))
    with tilegemm.patch(m, matmul=True):
        m.register_forward_pre_hook(lambda mod, a: 1 / 0, prepend=True)
        with Mine() as mine:
            with pytest.raises(ZeroDivisionError):
                m(torch.randn(3, 8))
            assert torch._C._len_torch_function_stack() == 1
            assert torch._C._get_function_stack_at(0) is mine


def test_fx_traces_a_patched_linear_subclass():
    """torch.fx traces into a Linear subclass of the user's (not a leaf): the patched forward must
    not branch on a Proxy (TraceError); the traced graph computes what the model does."""
    class MyLinear(torch.nn.Linear):
        pass

    torch.manual_seed(0)
    m, x = torch.nn.Sequential(MyLinear(8, 4)), torch.randn(3, 8)
    with tilegemm.patch(m):
        traced = torch.fx.symbolic_trace(m)
    assert torch.equal(traced(x), m(x))


def test_autocast_leaves_float64_as_torch_does():
    layer, x = torch.nn.Linear(8, 4).double(), torch.randn(3, 8, dtype=torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = layer(x)
        with tilegemm.patch(layer) as p:
            got = layer(x)
    assert got.dtype is want.dtype is torch.float64 and p.counts == {"tilegemm": 1, "torch": 0}
    torch.testing.assert_close(got, want)


def test_compiled_patched_model_compiles_once_and_counts_every_call():
    """The counts are made by the operators when they run, so a compiled model guards on no count:
    ten calls, one compilation (a recompilation raises), twenty products counted."""
    import torch._dynamo

    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 5, 8)
    torch._dynamo.reset()
    with tilegemm.patch(m, matmul=True) as p, torch._dynamo.config.patch(error_on_recompile=True):
        compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
        for _ in range(10):
            y = compiled(x)
    torch.testing.assert_close(y, m(x), rtol=1e-5, atol=1e-6)
    assert p.counts == {"tilegemm": 30, "torch": 0}


def test_undo_under_a_class_made_on_top_switches_the_patch_off():
    """A parametrization registered after the patch makes its own class on top of the patched one:
    undo cannot give the layer its class back without dropping the parametrization, so the layer
    keeps it and runs Linear's own forward from then on."""
    from torch.nn.utils import parametrize

    class Double(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    torch.manual_seed(0)
    layer, x = torch.nn.Linear(8, 4), torch.randn(3, 8)
    with tilegemm.patch(layer) as p:
        parametrize.register_parametrization(layer, "weight", Double())
        layer(x)
    got = layer(x)
    torch.testing.assert_close(got, torch.nn.functional.linear(x, 2 * layer.parametrizations.weight.original,
                                                               layer.bias))
    assert p.counts == {"tilegemm": 1, "torch": 0}


def test_a_layer_undone_under_a_parametrization_is_patched_again_once_it_is_gone():
    from torch.nn.utils import parametrize

    class Double(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    layer, x = torch.nn.Linear(8, 4), torch.randn(3, 8)
    p = tilegemm.patch(layer)
    parametrize.register_parametrization(layer, "weight", Double())
    p.undo()
    parametrize.remove_parametrizations(layer, "weight")
    with tilegemm.patch(layer) as q:
        layer(x)
    assert q.counts == {"tilegemm": 1, "torch": 0} and type(layer) is torch.nn.Linear


def test_compiled_function_transform_of_a_patched_model_compiles_once():
    import torch._dynamo

    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(4, 3, 8)
    torch._dynamo.reset()
    with tilegemm.patch(m), torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        compiled = torch.compile(torch.func.vmap(m), backend="eager")
        for _ in range(4):
            y = compiled(x)
    torch.testing.assert_close(y, torch.stack([m(t) for t in x]), rtol=1e-5, atol=1e-6)


def test_trace_records_the_operator_not_a_constant():
    torch.manual_seed(0)
    m, x, x2 = _Tiny(), torch.randn(3, 8), torch.randn(3, 8)
    for grad in (False, True):
        with torch.set_grad_enabled(grad), tilegemm.patch(m):
            traced = torch.jit.trace(m, x)
        assert "tilegemm::linear" in str(traced.inlined_graph)
        torch.testing.assert_close(traced(x2), m(x2), rtol=1e-5, atol=1e-6)


def test_trace_of_bmm_under_matmul_mode_warns_nothing():
    """torch.jit.trace of a model patched with matmul=True: bmm's batch rule compared traced sizes
    ("Converting a tensor to a Python boolean might cause the trace to be incorrect"), a warning
    from inside tilegemm that the unpatched trace does not give."""
    import warnings

    torch.manual_seed(0)
    m, a, b = _Bmm(), torch.randn(2, 5, 8), torch.randn(2, 8, 3)
    with tilegemm.patch(m, matmul=True), warnings.catch_warnings():
        warnings.simplefilter("error", torch.jit.TracerWarning)
        traced = torch.jit.trace(m, (a, b))
    assert "tilegemm::matmul" in str(traced.inlined_graph)
    a2, b2 = torch.randn(2, 5, 8), torch.randn(2, 8, 3)
    torch.testing.assert_close(traced(a2, b2), m(a2, b2), rtol=1e-5, atol=1e-6)


def test_subclasses_and_function_transforms_run_on_torch():
    """A tensor subclass (DTensor, a quantised weight) has rules of its own, and torch.func's
    wrapped tensors no memory of their own: both go to torch, counted."""

    class Sub(torch.Tensor):
        pass

    torch.manual_seed(0)
    m, x = _Tiny(), torch.randn(3, 8)
    want = m(x)
    with torch.no_grad(), tilegemm.patch(m) as p:
        got = m(x.as_subclass(Sub))
    torch.testing.assert_close(got.as_subclass(torch.Tensor), want)
    assert p.counts == {"tilegemm": 0, "torch": 2}
    params = dict(m.named_parameters())
    loss = lambda w: torch.func.functional_call(m, {**params, "up.weight": w}, (x,)).sum()  # noqa: E731
    want_grad = torch.func.grad(loss)(params["up.weight"])
    with tilegemm.patch(m) as p:
        got_grad = torch.func.grad(loss)(params["up.weight"])
        with torch.no_grad():
            got_v = torch.func.vmap(m)(torch.stack([x, 2 * x]))
    torch.testing.assert_close(got_grad, want_grad)
    torch.testing.assert_close(got_v[1], m(2 * x))
    assert p.counts == {"tilegemm": 0, "torch": 4}


def test_matmul_mode_keeps_torchs_rules_and_the_mode_stack():
    """bmm does not broadcast; a layer takes its input by torch's keyword; a pre-hook that raises
    before the patch's leaves the caller's own torch function mode in place."""

    class Bmm(torch.nn.Module):
        def forward(self, a, b):
            return torch.bmm(a, b)

    bm = Bmm()
    with tilegemm.patch(bm, matmul=True), pytest.raises(RuntimeError):
        bm(torch.randn(2, 3, 4), torch.randn(1, 4, 5))
    layer, x = torch.nn.Linear(8, 4), torch.randn(3, 8)
    with tilegemm.patch(layer):
        torch.testing.assert_close(layer(input=x), torch.nn.functional.linear(x, layer.weight, layer.bias))

    class Mine(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def refuse(module, args):
        raise ValueError("refused")

    m = _Tiny()
    m.register_forward_pre_hook(refuse)
    with tilegemm.patch(m, matmul=True), Mine():
        with pytest.raises(ValueError, match="refused"):
            m(torch.randn(3, 8))
        assert isinstance(torch.overrides._get_current_function_mode(), Mine)  # still there


def test_gemm_with_grad_is_differentiable_or_refused():
    if not torch.cuda.is_available():
        a = torch.randn(4, 4, requires_grad=True)
        with pytest.raises(tilegemm.DeviceError):  # as without grad: gemm is the tensor cores' entry
            tilegemm.gemm(a, a)
        return
    a = torch.randn(64, 32, device="cuda", requires_grad=True)
    b = torch.randn(32, 16, device="cuda", requires_grad=True)
    tilegemm.gemm(a.half(), b.half()).float().sum().backward()
    assert a.grad is not None and b.grad is not None
    with pytest.raises(AutogradError, match="plain product"):
        tilegemm.gemm(a, b, precision="tf32")


@pytest.mark.gpu
def test_gpu_patched_bf16_model_matches_torch():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(512, 1024, bias=False), torch.nn.GELU(),
                            torch.nn.Linear(1024, 512, bias=False)).cuda().bfloat16()
    x = torch.randn(4, 64, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        ref = m(x).double()
        with tilegemm.patch(m) as p:
            got = m(x).double()
        assert p.counts == {"tilegemm": 2, "torch": 0}
    assert float((got - ref).norm() / ref.norm()) < 2e-2
    # the same under a CUDA graph: the patched layers' launches are captured and replayed
    with torch.no_grad(), tilegemm.patch(m):
        m(x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = m(x)
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        F = torch.nn.functional  # torch's own layers, on the replay's new input
        ref = F.linear(F.gelu(F.linear(x, m[0].weight)), m[2].weight)
    assert float((out.double() - ref.double()).norm() / ref.double().norm()) < 2e-2
    # gradients against torch's
    w = [m[0].weight, m[2].weight]
    xg = x.detach().requires_grad_()
    m(xg).float().square().mean().backward()
    want = [t.grad.clone() for t in w] + [xg.grad.clone()]
    for t in w:
        t.grad = None
    xg.grad = None
    with tilegemm.patch(m):
        m(xg).float().square().mean().backward()
    for t, v in zip(w + [xg], want):
        assert float((t.grad.double() - v.double()).norm() / v.double().norm()) < 3e-2


@pytest.mark.gpu
def test_gpu_autocast_weight_is_cast_once_a_region():
    """Under CUDA autocast a patched layer's FP32 weight is cast by autocast itself, which keeps
    the cast for the region (as for nn.functional.linear): the same BF16 tensor at every call in a
    region, a new one in the next, and the layer's output is torch's, weight untouched."""
    torch.manual_seed(0)
    m = torch.nn.Linear(256, 128).cuda()
    x = torch.randn(4, 256, device="cuda")
    before = m.weight.detach().clone()
    with torch.no_grad():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            want = m(x)
            first, again = torchop._cast(m.weight, torch.bfloat16), torchop._cast(m.weight, torch.bfloat16)
            with tilegemm.patch(m) as p:
                got = m(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            later = torchop._cast(m.weight, torch.bfloat16)
    assert first.dtype is torch.bfloat16 and first.data_ptr() == again.data_ptr() != m.weight.data_ptr()
    assert torch.equal(later, first) and p.counts == {"tilegemm": 1, "torch": 0}
    assert got.dtype is want.dtype is torch.bfloat16 and torch.equal(m.weight, before)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gpu_float32_parameters_under_no_grad():
    """A float32 layer's weight is a Parameter: under no_grad it (and its views) still says
    requires_grad, and the SIMT path must read it all the same (no __cuda_array_interface__ error)."""
    m = torch.nn.Linear(64, 32).cuda()
    x = torch.randn(8, 64, device="cuda")
    with torch.no_grad():
        want = torch.nn.functional.linear(x, m.weight, m.bias)
        got = tilegemm.matmul(x, m.weight.t())
        with tilegemm.patch(m) as p:
            out = m(x)
    assert p.counts == {"tilegemm": 1, "torch": 0}
    torch.testing.assert_close(got + m.bias, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gpu_repeated_linear_goes_by_its_plan(monkeypatch, dtype):
    """A patched layer's second call of a shape runs by its linear plan (no call of tilegemm.matmul,
    no views): right on new data at new addresses, with and without a bias, 1-D to 3-D; the bias
    is added in the product's epilogue (one plan, no add after it; the first call too), on the
    tensor cores and on the FP32 rung that reads the weight's rows (k17). An activation whose rows
    are not a view of it (a transposed batch) is copied by reshape and never gets one."""
    from tilegemm import api, dispatch

    def unplanned(*args, **kwargs):
        raise AssertionError("a repeated call went past its linear plan")

    torch.manual_seed(0)
    F = torch.nn.functional
    tol = dict(rtol=2e-2, atol=2e-2) if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    for bias in (False, True):
        m = torch.nn.Linear(256, 384, bias=bias).cuda().to(dtype)
        if bias:  # a bias whose size shows: a rounding of it, or its omission, fails the comparison
            m.bias.data.uniform_(-4, 4)
        with torch.no_grad(), tilegemm.patch(m) as p:
            for shape in ((8, 256), (2, 3, 256), (256,)):
                x = torch.randn(shape, device="cuda", dtype=dtype)
                with monkeypatch.context() as mp:
                    if bias:  # the first call adds the bias in the epilogue as well
                        mp.setattr(api, "matmul", unplanned)
                    torch.testing.assert_close(m(x), F.linear(x, m.weight, m.bias), **tol)
                key = dispatch.linear_key(x, m.weight, x.data_ptr(), m.weight.data_ptr())
                if bias:
                    key += dispatch.bias_key(m.bias, m.bias.data_ptr())
                assert type(dispatch._PLANS.get(key)) is dispatch.ViewPlan, (shape, dispatch._PLANS.get(key))
                with monkeypatch.context() as mp:
                    for name in ("matmul", "plan"):
                        mp.setattr(api, name, unplanned)
                    mp.setattr(dispatch, "linear_bias", unplanned)
                    for _ in range(2):
                        x = torch.randn(shape, device="cuda", dtype=dtype)
                        got = m(x)
                        assert got.shape == (*shape[:-1], 384) and got.is_contiguous()
                        torch.testing.assert_close(got, F.linear(x, m.weight, m.bias), **tol)
            xt = torch.randn(3, 2, 256, device="cuda", dtype=dtype).transpose(0, 1)  # reshape copies it
            for _ in range(2):
                torch.testing.assert_close(m(xt), F.linear(xt, m.weight, m.bias), **tol)
            key = dispatch.linear_key(xt, m.weight, xt.data_ptr(), m.weight.data_ptr())
            assert not [k for k in dispatch._PLANS if k[:len(key)] == key]
        assert p.counts == {"tilegemm": 11, "torch": 0}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_a_lazily_negated_activation_or_bias_keeps_its_sign(dtype):
    """A patched layer given a lazy negation (torch's neg bit; its memory holds the negated values)
    as its activation, or holding one as its bias, after plain calls of the same keys made their
    plans (the bias in the epilogue): the values are multiplied and added, not the memory."""
    torch.manual_seed(2)
    F = torch.nn.functional
    tol = dict(rtol=2e-2, atol=5e-2) if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    m = torch.nn.Linear(64, 48).cuda().to(dtype)
    m.bias.data.uniform_(-4, 4)
    x = torch.randn(8, 64, device="cuda", dtype=dtype)
    with torch.no_grad(), tilegemm.patch(m):
        for inp in (x, x, torch._neg_view(x), x):
            torch.testing.assert_close(m(inp), F.linear(inp, m.weight, m.bias), **tol)
        plain = m.bias
        m.bias = torch.nn.Parameter(torch._neg_view(plain.detach().neg()))  # the same values, negated memory
        assert m.bias.is_neg()
        for _ in range(2):
            torch.testing.assert_close(m(x), F.linear(x, m.weight, plain), **tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_a_strided_bias_is_added_after_the_plan(dtype):
    """A bias that is not a contiguous row (a strided view) is in no kernel's epilogue: the linear
    plan runs the product and torch adds it (AddBias), right on every call."""
    from tilegemm import dispatch

    torch.manual_seed(1)
    m = torch.nn.Linear(64, 48).cuda().to(dtype)
    m.bias = torch.nn.Parameter(torch.randn(96, device="cuda", dtype=dtype)[::2])
    assert not m.bias.is_contiguous()
    tol = dict(rtol=2e-2, atol=2e-2) if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    with torch.no_grad(), tilegemm.patch(m) as p:
        for _ in range(3):
            x = torch.randn(5, 64, device="cuda", dtype=dtype)
            torch.testing.assert_close(m(x), torch.nn.functional.linear(x, m.weight, m.bias), **tol)
    key = dispatch.linear_key(x, m.weight, x.data_ptr(), m.weight.data_ptr()) + dispatch.bias_key(m.bias,
                                                                                                  m.bias.data_ptr())
    assert type(dispatch._PLANS.get(key)) is dispatch.AddBias
    assert p.counts == {"tilegemm": 3, "torch": 0}


def test_patch_reads_a_parametrized_weight():
    """A patched layer reads its weight and bias from _parameters; a parametrized weight is not
    there (torch.nn.utils.parametrize computes it), and is asked for by name: the product is the
    computed weight's, as torch's."""
    from torch.nn.utils import parametrize

    class Doubled(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    lin = torch.nn.Linear(8, 6)
    parametrize.register_parametrization(lin, "weight", Doubled())
    x = torch.randn(3, 8)
    with torch.no_grad(), tilegemm.patch(lin) as p:
        got = lin(x)
    torch.testing.assert_close(got, torch.nn.functional.linear(x, lin.weight, lin.bias), rtol=1e-5, atol=1e-5)
    assert p.counts == {"tilegemm": 1, "torch": 0}


def test_linear_plan_is_the_rows_plan_with_the_layer_shape(moved):
    """remember_linear keeps the 2-D call's plan for x @ wᵀ only where x's rows are a view of x;
    fast_linear then runs that plan at x's and w's addresses into an output of x's leading shape
    (a stand-in plan here: CPU tensors have none of their own). With a bias: kept under the bias's
    key too, the bias added after the product (in place where it is of y's dtype); a plan that
    adds it in its epilogue (`linear_bias`'s, here stood in for) is given the bias's address."""
    from tilegemm import dispatch

    class Recorder(dispatch.LaunchPlan):
        def __init__(self, out_shape):
            self.out_shape, self.calls = out_shape, []
            self.out_dtype, self.device, self.index = torch.float32, torch.device("cpu"), -1

        def run(self, pa, pb, c, psa, psb, view=None, pi=0):
            c = torch.zeros(view[0]) if c is None else c
            self.calls.append((pa, pb, tuple(c.shape), c.stride(), pi))
            return c

    dispatch._bind_torch()
    w, bias = torch.randn(6, 4), torch.randn(6)
    for x, viewed in ((torch.randn(2, 3, 4), True), (torch.randn(3, 2, 4).transpose(0, 1), False),
                      (torch.randn(6, 4), True), (torch.randn(4), True)):
        rows, wt = x.reshape(-1, 4), w.t()
        fake = Recorder((rows.shape[0], 6))
        dispatch._PLANS[dispatch.call_key(rows, wt)] = fake
        try:
            dispatch.remember_linear(x, w, rows, wt)
            dispatch.remember_linear(x, w, rows, wt, bias)
            y = dispatch.fast_linear(x, w)
            if viewed:
                assert fake.calls == [(x.data_ptr(), w.data_ptr(), (*x.shape[:-1], 6), y.stride(), 0)]
                assert y.shape == (*x.shape[:-1], 6) and y.is_contiguous()
                assert dispatch.fast_linear(moved(x), moved(w)) is not None  # new addresses, the same key
                yb = dispatch.fast_linear(x, w, bias)  # the product (zeros, by the stand-in), then the bias
                assert yb.shape == y.shape and torch.equal(yb, bias.expand_as(yb))
                assert dispatch.fast_linear(x, w, bias.double()) is None  # another bias key: not kept
                key = dispatch.linear_key(x, w, x.data_ptr(), w.data_ptr()) + dispatch.bias_key(bias, bias.data_ptr())
                assert type(dispatch._PLANS[key]) is dispatch.AddBias and dispatch._PLANS[key].in_place
                dispatch._PLANS[key] = dispatch.ViewPlan(fake, y.shape)  # as linear_bias keeps it
                other = bias.clone()
                yb = dispatch.fast_linear(x, w, other)
                assert fake.calls[-1][-1] == other.data_ptr() and not yb.any()  # the plan adds it, not torch
            else:
                assert y is None and not fake.calls
                assert dispatch.fast_linear(x, w, bias) is None
            assert dispatch.fast_linear(x.to_sparse(), w) is None and dispatch.fast_linear(x.double(), w) is None
            assert dispatch.fast_linear(x, w, bias.to_sparse()) is None
        finally:
            dispatch.reset()


def test_linear_bias_keeps_its_plan_under_the_layers_key_only(monkeypatch):
    """dispatch.linear_bias runs x @ wᵀ + bias as one problem (the bias a broadcast row, beta 1, the
    plain product's tuning class) and keeps the plan that run built under x, w and the bias's key
    only, as a view of x's leading shape; x whose rows are a copy gets none. (The tensor cores'
    run is stood in for: a CPU has none.)"""
    from tilegemm import dispatch, registry
    from tilegemm.tuning import cache

    class Recorder(dispatch.LaunchPlan):
        def __init__(self, out_shape):
            self.out_shape, self.out_dtype, self.index = out_shape, torch.float32, -1

    tensorcore = registry.get("tc_persistent")
    assert tensorcore.backend == "tensorcore"

    seen = []

    def run_problem(p, kernel="auto", key=None, **_):
        seen.append((p.bias_row, cache.problem_class(p).endswith("|nobeta"), kernel))
        p.c.copy_(p.a @ p.b + p.c_in)
        if key is not None:
            dispatch._store(key, Recorder(tuple(p.c.shape)))
        return {}

    monkeypatch.setattr(dispatch, "run_problem", run_problem)
    dispatch._bind_torch()
    w, bias = torch.randn(6, 4), torch.randn(6)
    for x, viewed in ((torch.randn(2, 3, 4), True), (torch.randn(3, 2, 4).transpose(0, 1), False),
                      (torch.randn(4), True)):
        rows = x.reshape(-1, 4)
        try:
            y = dispatch.linear_bias(x, w, bias, rows, w.t(), tensorcore)
            torch.testing.assert_close(y, torch.nn.functional.linear(x, w, bias))
            assert seen[-1] == (True, True, "auto")
            key = dispatch.linear_key(x, w, x.data_ptr(), w.data_ptr()) + dispatch.bias_key(bias, bias.data_ptr())
            plan = dispatch._PLANS.get(key)
            if viewed:
                assert type(plan) is dispatch.ViewPlan and plan.out_shape == (*x.shape[:-1], 6)
                assert list(dispatch._PLANS) == [key]  # the 2-D call's own key not left behind
            else:
                assert plan is None and not dispatch._PLANS
        finally:
            dispatch.reset()


def test_served_says_which_products_tilegemm_runs():
    """`served` (asked before every patched layer's product) on the host: float32/float64 of one
    dtype, strided, on the CPU; anything else (bfloat16, mixed dtypes, sparse, meta) goes to torch."""
    from tilegemm.torchop import served

    a32, a64 = torch.ones(2, 3), torch.ones(2, 3, dtype=torch.float64)
    assert served(a32, a32.t()) and served(a64, a64)
    assert not served(a32, a64) and not served(a32.bfloat16(), a32.bfloat16())
    assert not served(a32.to_sparse(), a32) and not served(a32, a32.to_sparse())
    assert not served(a32.to("meta"), a32.to("meta")) and not served(a32, a32.to("meta"))


def test_patch_refuses_what_is_no_model_and_a_matmul_that_is_no_flag():
    """patch(None) and patch(model, matmul="no"): one TypeError each, the model untouched ("no" is
    truthy: it patched torch.matmul inside the model)."""
    m = torch.nn.Sequential(torch.nn.Linear(8, 4))
    with pytest.raises(TypeError, match="expected a torch.nn.Module; got builtins.NoneType"):
        tilegemm.patch(None)
    for bad in ("no", 2, None, 0.0):
        with pytest.raises(TypeError, match="matmul is True or False"):
            tilegemm.patch(m, matmul=bad)
        assert type(m[0]) is torch.nn.Linear
    for ok in (True, False, 1, 0):
        tilegemm.patch(m, matmul=ok).undo()
        assert type(m[0]) is torch.nn.Linear


def test_a_patch_that_fails_halfway_gives_back_what_it_patched():
    """A layer class whose subclass cannot be made (its __init_subclass__ wants an argument) after
    other layers: the layers before it stayed patched, with no Patch to undo them."""
    class Strict(torch.nn.Linear):
        def __init_subclass__(cls, *, tag, **kw):
            super().__init_subclass__(**kw)

    m = torch.nn.Sequential(torch.nn.Linear(8, 8), Strict(8, 4))
    with pytest.raises(TypeError):
        tilegemm.patch(m)
    assert type(m[0]) is torch.nn.Linear and type(m[1]) is Strict
    with tilegemm.patch(torch.nn.Sequential(torch.nn.Linear(8, 4))) as p:  # (a later patch of another model: fine)
        pass
    assert p.counts == {"tilegemm": 0, "torch": 0}


def test_the_linear_operator_refuses_a_dual_input_before_a_plan_serves_it():
    """torch.ops.tilegemm.linear has no forward-AD formula: called on a dual tensor its body runs
    on the tensor, and a kept plan (or the bias epilogue) would return a result without its tangent.
    A stand-in plan under the call's key shows the refusal comes first."""
    import torch.autograd.forward_ad as fwad

    from tilegemm import dispatch
    from tilegemm.errors import AutogradError

    x, w = torch.randn(4, 3), torch.randn(5, 3)
    dispatch.plain(x)

    class Served:
        def run(self, *args):
            return torch.zeros(4, 5)

    dispatch._PLANS[dispatch.linear_key(x, w, x.data_ptr(), w.data_ptr())] = Served()
    try:
        with fwad.dual_level(), pytest.raises(AutogradError, match="x is a forward-mode AD dual tensor"):
            torch.ops.tilegemm.linear(fwad.make_dual(x, torch.ones_like(x)), w)
    finally:
        dispatch.reset()


@pytest.mark.parametrize("matmul", [False, True])
def test_complex_gradients_are_torchs(matmul):
    """A complex layer or product runs on torch, but through the operator where it needs a gradient:
    the operator's backward must take the conjugates (grad_a = g @ b^H), as torch's does."""
    g = torch.Generator().manual_seed(5)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3, dtype=torch.cdouble)

        def forward(self, x, b):
            return self.lin(x) @ b

    x = torch.randn(2, 4, dtype=torch.cdouble, generator=g, requires_grad=True)
    b = torch.randn(3, 2, dtype=torch.cdouble, generator=g, requires_grad=True)
    m = M()
    m(x, b).abs().sum().backward()
    want = [t.grad.clone() for t in (x, b, m.lin.weight, m.lin.bias)]
    for t in (x, b, m.lin.weight, m.lin.bias):
        t.grad = None
    with tilegemm.patch(m, matmul=matmul):
        m(x, b).abs().sum().backward()
    for w, t in zip(want, (x, b, m.lin.weight, m.lin.bias)):
        torch.testing.assert_close(t.grad, w)
    c = torch.randn(4, 2, dtype=torch.cdouble, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, c: torch.ops.tilegemm.matmul(a, c), (x, c))
    assert torch.autograd.gradcheck(lambda a, w, c: torch.ops.tilegemm.linear(a, w, c),
                                    (x, m.lin.weight, m.lin.bias))


def test_a_tensor_with_no_memory_goes_to_torch_in_a_patched_layer():
    """A ZeroTensor (torch's lazy zeros, which some backward formulas make) or a functionalization
    wrapper has no memory holding its values: tilegemm.matmul refuses it, and a patched layer
    gives it to torch, as torch's own layer runs it (it raised the LayoutError)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 5)
    want = lin.bias.detach().expand(4, 5)
    tilegemm.patch(lin)
    with torch.no_grad():
        for x in (torch._efficientzerotensor((4, 3)), torch._to_functional_tensor(torch.zeros(4, 3))):
            for y, expected in ((lin(x), want), (torchop._matmul(x, lin.weight.t()), torch.zeros(4, 5))):
                assert torch.equal(torch._from_functional_tensor(y) if torch._is_functional_tensor(y) else y, expected)


@pytest.mark.parametrize("xshape,k,n", [((2, 3, 0), 0, 5), ((2, 3, 4), 4, 0), ((2, 0), 0, 5)])
def test_an_empty_layer_runs_as_torchs(xshape, k, n):
    """K = 0 or N = 0 with an N-D activation: reshape(-1, 0) is ambiguous; the layer's product and
    its gradient are torch's (zeros, the bias)."""
    lin = torch.nn.Linear(k, n)
    x = torch.randn(*xshape, requires_grad=True)
    want = lin(x)
    want.sum().backward()
    gx, gw = x.grad.clone(), lin.weight.grad.clone()
    x.grad = lin.weight.grad = None
    with tilegemm.patch(lin):
        with torch.no_grad():
            assert torch.equal(lin(x), want)
        y = lin(x)
        y.sum().backward()
    assert torch.equal(y, want) and torch.equal(x.grad, gx) and torch.equal(lin.weight.grad, gw)


def test_inputs_torch_refuses_are_refused_as_torch_does():
    """A 0-D activation or one that is no tensor: torch's own error, not an IndexError or AttributeError."""
    lin = torch.nn.Linear(3, 2)
    for x in (torch.tensor(1.0), [1.0, 2.0, 3.0]):
        with pytest.raises(Exception) as want:
            lin(x)
        for grad in (False, True):
            with torch.set_grad_enabled(grad), tilegemm.patch(lin), pytest.raises(Exception) as got:
                lin(x)
            assert got.type is want.type and str(got.value) == str(want.value)


class _EqualLinear(torch.nn.Linear):  # equalized learning rate: the stored weight scaled on every read
    def __init__(self, i, o):
        super().__init__(i, o)
        self.scale = i ** -0.5

    @property
    def weight(self):
        w = self.__dict__["_parameters"].get("weight")
        if w is None:
            raise AttributeError("weight")
        return w * self.scale if "scale" in self.__dict__ else w


def test_a_class_that_gives_its_weight_its_own_way_is_asked_by_name():
    torch.manual_seed(0)
    m = torch.nn.Sequential(_EqualLinear(8, 4))
    x = torch.randn(3, 8)
    want = m(x)
    for matmul in (False, True):
        with tilegemm.patch(m, matmul=matmul) as p:
            torch.testing.assert_close(m(x), want)
        assert p.counts == {"tilegemm": 1, "torch": 0}


class _Reduced(torch.nn.Linear):  # a layer with a __reduce__ of its own
    def __init__(self, i, o, note="none"):
        super().__init__(i, o)
        self.note = note

    def __reduce__(self):
        return (_Reduced, (self.in_features, self.out_features, self.note), None)


class _ReducedAsItself(_Reduced):
    def __reduce__(self):
        return (type(self), (self.in_features, self.out_features, self.note), None)


@pytest.mark.parametrize("cls", [_Reduced, _ReducedAsItself])
def test_a_copy_of_a_layer_with_its_own_reduce_is_made_by_it(cls):
    import copy
    import pickle

    m = cls(4, 3, "kept")
    with tilegemm.patch(m):
        for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
            assert type(c) is cls and c.note == "kept" and c.weight.shape == (3, 4)


def test_a_patched_matmul_served_by_its_plan_asks_nothing_more(monkeypatch):
    """A patched matmul that its plan serves goes by the plan first (as a patched layer's linear
    does): `served` (its dtype, layout, device and memory questions, about 0.6 µs) is asked only
    where no plan serves the call. A stand-in plan under the call's key shows which path ran."""
    from tilegemm import dispatch

    a, b = torch.randn(4, 3), torch.randn(3, 5)
    dispatch.plain(a)
    done = torch.zeros(4, 5)

    class Served:
        def run(self, *args):
            return done

    def asked(*args):
        raise AssertionError("served was asked of a call its plan serves")

    monkeypatch.setattr(torchop, "served", asked)
    try:
        dispatch._PLANS[dispatch.matmul_key(a, b, a.data_ptr(), b.data_ptr())] = Served()
        counts = {"tilegemm": 0, "torch": 0}
        assert torchop._matmul(a, b, counts) is done and counts == {"tilegemm": 1, "torch": 0}
    finally:
        dispatch.reset()


def test_multihead_attention_products_run_on_torch_uncounted():
    """nn.MultiheadAttention computes its projections through nn.functional.linear (training) or
    one fused operator (inference), never its out_proj layer's forward: a patch routes none of
    them, with or without matmul=True, and counts only what it routes (the model's own nn.Linear
    here), as the README and Patch say; the output is torch's."""
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.attn = torch.nn.Linear(16, 32), torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x):
            h = self.lin(x)
            return self.attn(h, h, h, need_weights=False)[0]

    model, x = Model(), torch.randn(2, 5, 16)
    for train in (False, True):
        model.train(train)
        want = model(x)
        for mm in (False, True):
            with tilegemm.patch(model, matmul=mm) as p:
                got = model(x)
            assert p.counts == {"tilegemm": 1, "torch": 0}, (train, mm, p.counts)
            assert torch.allclose(got, want, atol=1e-5), (train, mm)


def test_a_forward_bound_while_patched_runs_after_undo():
    """A hook library keeps the layer's bound forward (accelerate's _old_forward): called after
    undo it raised AttributeError ('_tilegemm_on'); it is the layer's own forward now, in either
    kind of patch."""
    for matmul in (False, True):
        layer = torch.nn.Linear(4, 3)
        x = torch.randn(2, 4)
        p = tilegemm.patch(layer, matmul=matmul)
        kept = layer.forward
        p.undo()
        assert torch.allclose(kept(x), torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-6)
        assert p.counts == {"tilegemm": 0, "torch": 0}


def test_a_patch_undone_refuses_to_be_entered_again():
    """`with p:` a second time ran the model on torch, counting nothing, without a word."""
    layer = torch.nn.Linear(4, 3)
    with tilegemm.patch(layer) as p:
        layer(torch.randn(2, 4))
    with pytest.raises(RuntimeError, match="this patch was undone"):
        with p:
            pass
    assert p.counts == {"tilegemm": 1, "torch": 0} and type(layer) is torch.nn.Linear


@pytest.mark.parametrize("frozen", ["weight", "input"])
def test_the_backward_keeps_only_what_a_gradient_asked_for_reads(frozen):
    """A frozen weight's layer (LoRA's base) kept its activation until the backward, as torch's
    does not: each operand is saved only where the other's gradient is asked for; the gradients
    are torch's."""
    g = torch.Generator().manual_seed(5)
    w = torch.randn(6, 8, dtype=torch.float64, generator=g, requires_grad=frozen == "input")
    x = torch.randn(5, 8, dtype=torch.float64, generator=g, requires_grad=frozen == "weight")

    def saved_by(fn):
        shapes = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: shapes.append(tuple(t.shape)) or t, lambda t: t):
            out = fn()
        return shapes, out

    for fn, torchs, w_saved in ((lambda: torch.ops.tilegemm.linear(x, w), lambda: torch.nn.functional.linear(x, w),
                                 (6, 8)),
                                (lambda: torch.ops.tilegemm.matmul(x, w.t()), lambda: x @ w.t(), (8, 6))):
        shapes, out = saved_by(fn)
        want = [w_saved] if frozen == "weight" else [(5, 8)]
        assert shapes == want, (shapes, want)
        leaf = x if frozen == "weight" else w
        assert torch.allclose(torch.autograd.grad(out.square().sum(), leaf)[0],
                              torch.autograd.grad(torchs().square().sum(), leaf)[0])


def test_the_linear_operators_fake_is_torchs_own():
    """The fake (meta) result of the linear operator took its shape from x and the weight alone: a
    meta layer given an input of the wrong width answered (3, 8), and torch.compile failed in the
    backward's trace ("shape '[8, 4]' is invalid"); torch's own error comes now, from the forward."""
    layer = torch.nn.Linear(4, 8, device="meta")
    with tilegemm.patch(layer):
        with pytest.raises(RuntimeError, match="reduction dim|cannot be multiplied"):
            layer(torch.empty(3, 5, device="meta"))
        assert layer(torch.empty(3, 4, device="meta")).shape == (3, 8)
        assert layer(torch.empty(2, 3, 4, device="meta")).shape == (2, 3, 8)


def test_a_cpu_layers_products_stay_on_the_cpu(monkeypatch):
    """A patched layer on the CPU ran api.matmul's "auto", which on a machine with a GPU copies
    host operands there and back on every call (and starts CUDA in a process that meant none): a
    CPU layer's products, forward and backward, run on the host kernel, as torch's run where the
    tensors are."""
    asked = []
    real = torchop.api.matmul

    def spy(a, b, **kw):
        asked.append(kw.get("kernel", "auto"))
        return real(a, b, **kw)

    monkeypatch.setattr(torchop.api, "matmul", spy)
    layer = torch.nn.Linear(8, 4).double()
    x = torch.randn(3, 2, 8, dtype=torch.float64, requires_grad=True)
    with tilegemm.patch(layer, matmul=True) as p:
        y = layer(x)
        (y @ torch.ones(4, 2, dtype=torch.float64)).sum().backward()
    assert p.counts == {"tilegemm": 1, "torch": 0}
    assert asked and set(asked) == {torchop.HOST_KERNEL}, asked
    want = torch.autograd.grad(torch.nn.functional.linear(x, layer.weight, layer.bias).sum() * 2, x)[0]
    torch.testing.assert_close(x.grad, want)


def test_a_cpu_batch_is_one_numpy_product(monkeypatch):
    """Named, the host kernel took N-D operands through the loop of 2-D products a kernel asked for
    by name gets (2-5x slower for attention's q @ kᵀ): it is numpy.matmul over the whole batch,
    as the host's own choice was."""
    from tilegemm import nd

    calls = []
    real = nd._host
    monkeypatch.setattr(nd, "_host", lambda *a: calls.append(1) or real(*a))
    g = torch.Generator().manual_seed(9)
    a, b = torch.randn(4, 3, 5, generator=g), torch.randn(4, 5, 2, generator=g)
    c = torchop._matmul(a, b)
    torch.testing.assert_close(c, a @ b)
    assert calls == [1]
    c.resize_(1)  # (torch's storage: see test_matmul_semantics)
