"""16-byte loads and stores for the Numba kernels: what CUDA C writes as `*(float4*)&x[i][j]`.

Numba indexes arrays one element at a time and tells LLVM only the element's alignment, so
LLVM's load/store vectorizer cannot merge four neighbouring loads into one 128-bit access.
These intrinsics emit the vector access directly, in the address space named:

    ldg4(A, i, j)            -> (A[i, j], A[i, j+1], A[i, j+2], A[i, j+3])   global, LDG.E.128
    stg4(C, i, j, v0..v3)     C[i, j:j+4] = v                                 global, STG.E.128
    lds4(S, i, j)            -> (S[i, j], ..., S[i, j+3])                    shared, LDS.128
    sts4(S, i, j, v0..v3)     S[i, j:j+4] = v                                 shared, STS.128
    at(X, i, j), put(X, i, j, v)   X[i, j] read / written, any address space, one element
    at_or0(X, i, j)          X[i, j] where (i, j) is inside X's shape, else 0   (edge tiles)
    put_in(X, i, j, v)       X[i, j] = v where (i, j) is inside X's shape, else nothing
    red4(C, i, j, v0..v3)     C[i, j:j+4] += v, atomically              global, RED.E.ADD.F32x4 (sm_90)
    add_in(C, i, j, v)        C[i, j] += v, atomically, where (i, j) is inside C's shape

red4 and add_in are split-K's partial sums meeting in C. From sm_90 (PTX 8.1) one
`red.global.add.v4.f32` adds four neighbours in one L2 operation; on older GPUs, and for other
element types, red4 is four scalar atomic adds (Numba's own `cuda.atomic.add`).

The last two are guarded accesses written as one call: a kernel generated in full (k14) has
hundreds of them, and written as `X[i, j] if i < M and j < K else 0` each is two branches of
Numba's IR, whose SSA passes grow with branches × variables (tens of seconds of compile time).
All of them skip Numba's negative-index wraparound (`i < 0 ? i + shape : i`), which Numba emits
for every signed index it cannot prove non-negative: in an inner loop that is several 64-bit
integer instructions per shared-memory access.

The caller guarantees what the hardware requires: C-contiguous arrays, the element address
16-byte aligned (row starts aligned, so row length a multiple of 4 elements for FP32, the data
pointer aligned, and j a multiple of 4), and i, j in bounds (no bounds or wraparound handling),
except for at_or0 and put_in, which check the bounds (a negative index is out of them).
Shared arrays used with lds4/sts4 must be declared with `alignment=SMEM_ALIGN`.

Under Numba's CUDA simulator the same names are plain Python functions doing the four scalar
accesses, so the kernels that use them still run (and are tested) on a CPU.
"""

from __future__ import annotations

from ... import _cuda

# cudasim refuses any explicit alignment on shared arrays; on a GPU 16 bytes lets one
# 128-bit access cover four FP32 elements.
SMEM_ALIGN = None if _cuda.SIMULATOR else 16

if _cuda.SIMULATOR:
    import threading

    def ldg4(a, i, j):
        return a[i, j], a[i, j + 1], a[i, j + 2], a[i, j + 3]

    def stg4(a, i, j, v0, v1, v2, v3):
        a[i, j] = v0
        a[i, j + 1] = v1
        a[i, j + 2] = v2
        a[i, j + 3] = v3

    lds4 = ldg4
    sts4 = stg4

    def at(a, i, j):
        return a[i, j]

    def put(a, i, j, v):
        a[i, j] = v

    def at_or0(a, i, j):
        return a[i, j] if 0 <= i < a.shape[0] and 0 <= j < a.shape[1] else a.dtype.type(0)

    def put_in(a, i, j, v):
        if 0 <= i < a.shape[0] and 0 <= j < a.shape[1]:
            a[i, j] = v

    _ADD = threading.Lock()  # the simulator runs a thread per CUDA thread: an add is atomic under it

    def red4(a, i, j, v0, v1, v2, v3):
        with _ADD:
            for q, v in enumerate((v0, v1, v2, v3)):
                a[i, j + q] += v

    def add_in(a, i, j, v):
        if 0 <= i < a.shape[0] and 0 <= j < a.shape[1]:
            with _ADD:
                a[i, j] += v

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils, nvvmutils
    from numba.cuda.core import targetconfig
    from numba.cuda.extending import intrinsic

    _GLOBAL, _SHARED = 1, 3

    def _index(context, builder, aryty, ary, i, ity, j, jty):
        """(the array's struct, i and j as intp)."""
        arr = context.make_array(aryty)(context, builder, value=ary)
        return arr, context.cast(builder, i, ity, types.intp), context.cast(builder, j, jty, types.intp)

    def _item(context, builder, aryty, arr, ii, jj):
        """Pointer to element (ii, jj): no wraparound, no checks."""
        return cgutils.get_item_pointer(context, builder, aryty, arr, [ii, jj], wraparound=False)

    def _vec_ptr(context, builder, aryty, ary, i, ity, j, jty, addrspace):
        """Pointer to <4 x T> at ary[i, j], cast into `addrspace` (no wraparound, no checks)."""
        arr, ii, jj = _index(context, builder, aryty, ary, i, ity, j, jty)
        ptr = _item(context, builder, aryty, arr, ii, jj)
        elt = context.get_value_type(aryty.dtype)
        vec = ir.VectorType(elt, 4)
        spaced = builder.addrspacecast(ptr, elt.as_pointer(addrspace))
        return builder.bitcast(spaced, vec.as_pointer(addrspace))

    def _check(a, i, j):
        if not (isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C"):
            raise TypeError(f"vector access needs a 2-D C-contiguous array, got {a}")
        if not (isinstance(i, types.Integer) and isinstance(j, types.Integer)):
            raise TypeError("vector access needs integer indices")

    def _make_load(addrspace):
        @intrinsic
        def load4(typingctx, a, i, j):
            _check(a, i, j)
            sig = types.UniTuple(a.dtype, 4)(a, i, j)

            def codegen(context, builder, signature, args):
                aryty, ity, jty = signature.args
                vptr = _vec_ptr(context, builder, aryty, args[0], args[1], ity, args[2], jty, addrspace)
                v = builder.load(vptr, align=16)
                vals = [builder.extract_element(v, ir.Constant(ir.IntType(32), q)) for q in range(4)]
                return context.make_tuple(builder, signature.return_type, vals)

            return sig, codegen

        return load4

    def _make_store(addrspace):
        @intrinsic
        def store4(typingctx, a, i, j, v0, v1, v2, v3):
            _check(a, i, j)
            sig = types.void(a, i, j, v0, v1, v2, v3)

            def codegen(context, builder, signature, args):
                aryty, ity, jty = signature.args[:3]
                vptr = _vec_ptr(context, builder, aryty, args[0], args[1], ity, args[2], jty, addrspace)
                elt = context.get_value_type(aryty.dtype)
                v = ir.Constant(ir.VectorType(elt, 4), ir.Undefined)
                for q in range(4):
                    x = context.cast(builder, args[3 + q], signature.args[3 + q], aryty.dtype)
                    v = builder.insert_element(v, x, ir.Constant(ir.IntType(32), q))
                builder.store(v, vptr, align=16)
                return context.get_dummy_value()

            return sig, codegen

        return store4

    @intrinsic
    def at(typingctx, a, i, j):
        """a[i, j] without Numba's negative-index wraparound (i, j must be in bounds)."""
        _check(a, i, j)

        def codegen(context, builder, signature, args):
            aryty, ity, jty = signature.args
            arr, ii, jj = _index(context, builder, aryty, args[0], args[1], ity, args[2], jty)
            return builder.load(_item(context, builder, aryty, arr, ii, jj))

        return a.dtype(a, i, j), codegen

    @intrinsic
    def put(typingctx, a, i, j, v):
        """a[i, j] = v without Numba's negative-index wraparound (i, j must be in bounds)."""
        _check(a, i, j)

        def codegen(context, builder, signature, args):
            aryty, ity, jty, vty = signature.args
            arr, ii, jj = _index(context, builder, aryty, args[0], args[1], ity, args[2], jty)
            builder.store(context.cast(builder, args[3], vty, aryty.dtype), _item(context, builder, aryty, arr, ii, jj))
            return context.get_dummy_value()

        return types.void(a, i, j, v), codegen

    def _guard(context, builder, aryty, ary, i, ity, j, jty):
        """(array, i and j as intp, whether 0 ≤ i < rows and 0 ≤ j < columns): one unsigned compare
        each covers both ends."""
        arr, ii, jj = _index(context, builder, aryty, ary, i, ity, j, jty)
        rows, cols = cgutils.unpack_tuple(builder, arr.shape, 2)
        inside = builder.and_(builder.icmp_unsigned("<", ii, rows), builder.icmp_unsigned("<", jj, cols))
        return arr, ii, jj, inside

    @intrinsic
    def at_or0(typingctx, a, i, j):
        """a[i, j] where (i, j) is inside a's shape, else 0 (one call, no branches in Numba's IR)."""
        _check(a, i, j)

        def codegen(context, builder, signature, args):
            aryty, ity, jty = signature.args
            arr, ii, jj, inside = _guard(context, builder, aryty, args[0], args[1], ity, args[2], jty)
            out = cgutils.alloca_once_value(builder, context.get_constant(aryty.dtype, 0))
            with builder.if_then(inside, likely=True):
                builder.store(builder.load(_item(context, builder, aryty, arr, ii, jj)), out)
            return builder.load(out)

        return a.dtype(a, i, j), codegen

    def _atomic_add(context, builder, dtype, ptr, value) -> None:
        """*ptr += value, atomically (what Numba's `cuda.atomic.add` emits for the dtype)."""
        lmod = builder.module
        if dtype == types.float32:
            builder.call(nvvmutils.declare_atomic_add_float32(lmod), (ptr, value))
        elif dtype == types.float64:
            builder.call(nvvmutils.declare_atomic_add_float64(lmod), (ptr, value))
        else:
            builder.atomic_rmw("add", ptr, value, "monotonic")

    @intrinsic
    def red4(typingctx, a, i, j, v0, v1, v2, v3):
        """a[i, j:j+4] += (v0..v3), atomically: one 16-byte reduction in L2 on sm_90 for FP32."""
        _check(a, i, j)
        sig = types.void(a, i, j, v0, v1, v2, v3)

        def codegen(context, builder, signature, args):
            aryty, ity, jty = signature.args[:3]
            dt = aryty.dtype
            vals = [context.cast(builder, args[3 + q], signature.args[3 + q], dt) for q in range(4)]
            cc = targetconfig.ConfigStack().top().compute_capability  # the architecture compiled for
            arr, ii, jj = _index(context, builder, aryty, args[0], args[1], ity, args[2], jty)
            ptr = _item(context, builder, aryty, arr, ii, jj)
            if dt == types.float32 and cc >= (9, 0):
                f32 = ir.FloatType()
                fnty = ir.FunctionType(ir.VoidType(), [ptr.type] + [f32] * 4)
                red = ir.InlineAsm(fnty, "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f,~{memory}",
                                   side_effect=True)
                builder.call(red, [ptr, *vals])
            else:
                for q in range(4):
                    _atomic_add(context, builder, dt, builder.gep(ptr, [ir.Constant(ir.IntType(32), q)]), vals[q])
            return context.get_dummy_value()

        return sig, codegen

    def _guarded_write(name, write):
        """An intrinsic `name`(a, i, j, v) doing write(context, builder, dtype, pointer to a[i, j], v)
        where (i, j) is inside a's shape, and nothing elsewhere."""

        def guarded(typingctx, a, i, j, v):
            _check(a, i, j)

            def codegen(context, builder, signature, args):
                aryty, ity, jty, vty = signature.args
                arr, ii, jj, inside = _guard(context, builder, aryty, args[0], args[1], ity, args[2], jty)
                value = context.cast(builder, args[3], vty, aryty.dtype)
                with builder.if_then(inside, likely=True):
                    write(context, builder, aryty.dtype, _item(context, builder, aryty, arr, ii, jj), value)
                return context.get_dummy_value()

            return types.void(a, i, j, v), codegen

        guarded.__name__ = guarded.__qualname__ = name
        return intrinsic(guarded)

    put_in = _guarded_write("put_in", lambda context, builder, dtype, ptr, value: builder.store(value, ptr))
    add_in = _guarded_write("add_in", _atomic_add)  # a[i, j] += v, atomically

    ldg4 = _make_load(_GLOBAL)
    stg4 = _make_store(_GLOBAL)
    lds4 = _make_load(_SHARED)
    sts4 = _make_store(_SHARED)


def aligned16(*arrays) -> bool:
    """Every array's data pointer is a multiple of 16 bytes (host-side check before a launch)."""
    for x in arrays:
        ptr = getattr(x, "data_address", None)  # a stand-in for an array (the traffic counter's proxies)
        for attr in ("__cuda_array_interface__", "__array_interface__") if ptr is None else ():  # device; host
            try:
                ptr = getattr(x, attr)["data"][0]
                break
            except (AttributeError, KeyError, TypeError):
                continue
        if ptr is None or ptr % 16:
            return False
    return True
