"""The refusal table: which aten operators compute each operator a test may forbid, and what a Triton launcher may
run. Data only, no import: refusals.py reads it, and the grader sends this file's text with every request to a
student's kernel (autograder/kernel/in_kernel/), so that a kernel whose copy was emptied or rewritten as data
still refuses by the grader's table."""

# The aten operators that compute what each Python-level name a test may forbid computes ("x*": every operator
# whose name starts with x). Whatever path reaches them (an alias, torch.ops.aten, a composite operator, a custom
# op, another thread) ends in one of these. A name not listed stands for the aten operator of the same name.
PRODUCTS = ("matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "inner", "outer",
            "ger", "addr", "einsum", "tensordot", "linear", "bilinear", "_trilinear", "chain_matmul",
            "linalg_multi_dot", "linalg_vecdot", "_addmm_activation", "_int_mm", "_sparse_mm", "_sparse_addmm",
            "sspaddmm", "_sparse_sparse_matmul", "_scaled_mm")
KERNELS = {
    "scaled_dot_product_attention": ("scaled_dot_product_attention", "_scaled_dot_product_*"),
    "multi_head_attention_forward": ("_native_multi_head_attention",),
    "softmax": ("softmax", "_softmax", "_safe_softmax", "special_softmax"),
    "log_softmax": ("log_softmax", "_log_softmax", "special_log_softmax"),
    "logsumexp": ("logsumexp", "special_logsumexp"),
    **{name: PRODUCTS for name in ("matmul", "mm", "bmm", "baddbmm", "einsum")},
}
# the dispatch keys whose kernels compute (autograd and the Python keys only pass a call on)
COMPUTING_KEYS = ("CPU", "CUDA", "MPS", "XPU", "SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA",
                  "MkldnnCPU", "QuantizedCPU", "QuantizedCUDA", "NestedTensorCPU", "NestedTensorCUDA",
                  "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")

# What a launcher may do in PyTorch around its Triton kernels: make tensors, view them, copy or convert them.
# Every other aten operator computes, and where an exercise asks a kernel to compute, it is refused.
LAUNCHER_OPS = frozenset("""empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
    ones_like new_ones full full_like new_full fill_ zero_ scalar_tensor view _unsafe_view reshape _reshape_alias
    as_strided expand expand_as permute transpose t unsqueeze squeeze select slice narrow split split_with_sizes unbind
    chunk alias detach lift lift_fresh view_as flatten unflatten movedim clone contiguous copy_ _to_copy to
    _copy_from _copy_from_and_resize resize_ set_ _local_scalar_dense is_nonzero""".split())
