"""What the tests need that differs across the torch releases setup.cfg admits (torch>=2.4)."""

import contextlib


@contextlib.contextmanager
def safe_globals(admitted):
    """``torch.serialization.safe_globals(admitted)``: torch 2.4 has only ``add_safe_globals``, which
    admits for good, so there the list torch had is put back afterwards."""
    import torch  # noqa: PLC0415 - the tests that admit globals have torch

    serialization = torch.serialization
    if hasattr(serialization, "safe_globals"):
        with serialization.safe_globals(admitted):
            yield
        return
    before = list(serialization.get_safe_globals())  # (torch 2.4 hands out its own list)
    serialization.add_safe_globals(admitted)
    try:
        yield
    finally:
        serialization.clear_safe_globals()
        serialization.add_safe_globals(before)


def public_njt(values, offsets, min_seqlen, max_seqlen):
    """``torch.nested.nested_tensor_from_jagged`` with the shortest and longest lengths where torch takes
    them (torch 2.4 does not: it finds them from the offsets)."""
    import torch  # noqa: PLC0415

    try:
        return torch.nested.nested_tensor_from_jagged(values, offsets, min_seqlen=min_seqlen, max_seqlen=max_seqlen)
    except TypeError:
        return torch.nested.nested_tensor_from_jagged(values, offsets)


def seqlens(njt):
    """A jagged tensor's (shortest, longest) component lengths, as ints, on every torch."""
    if hasattr(njt, "_get_max_seqlen"):
        return njt._get_min_seqlen(), njt._get_max_seqlen()
    return int(njt._min_seqlen), int(njt._max_seqlen)  # torch 2.4


def torch_jagged(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, an op of torch's own jagged layout that a test takes as its oracle: where
    this torch's jagged layout lacks it (NotImplementedError: torch 2.4 has no CPU to_padded_tensor),
    the test is skipped, as it has no oracle."""
    import pytest  # noqa: PLC0415
    import torch  # noqa: PLC0415

    try:
        return fn(*args, **kwargs)
    except NotImplementedError as err:
        pytest.skip(f"torch {torch.__version__}'s jagged layout lacks {err} (the oracle of this test)")


#: the torch release whose jagged layout (``torch.nested``, layout=torch.jagged) the tests below take as
#: their oracle: the one the test extra pins. Older releases' jagged layouts lack their ops (torch 2.4:
#: to_padded_tensor on CPU, amax, permute, log_softmax, masked_select, cat of one tensor...), refuse
#: other calls or crash (2.4: unbind's backward, a segfault), so there they are skipped (tests/conftest.py).
JAGGED_ORACLE_RELEASE = (2, 13)
JAGGED_ORACLE_TESTS = {
    "tests/nested/test_attention.py::test_log_softmax",
    "tests/nested/test_attention.py::test_rms_norm_matches_jagged",
    "tests/nested/test_attention.py::test_softmax_over_the_ragged_dim_gradient_is_the_per_component_one",
    "tests/nested/test_hollow_nested.py::test_cat_of_no_component_and_some",
    "tests/nested/test_hollow_nested.py::test_dense_of_no_row",
    "tests/nested/test_hollow_nested.py::test_hollow_lod_tensor_round_trips",
    "tests/nested/test_hollow_nested.py::test_no_component_errors_as_torch",
    "tests/nested/test_hollow_nested.py::test_ops_match_torch_jagged",
    "tests/nested/test_hollow_nested.py::test_padded_with_output_size",
    "tests/nested/test_hollow_nested.py::test_strided_empty_list_as_torch",
    "tests/nested/test_hollow_review.py::test_probed_ops_match_torch",
    "tests/nested/test_jagged_equal_lengths.py::test_jagged_op_matches_torch",
    "tests/nested/test_nested_autograd_hunt.py::test_ragged_extreme_ties_match_torch_jagged",
    "tests/nested/test_nested_hunt.py::test_integer_and_special_pointwise_ops_match_torch",
    "tests/nested/test_nested_hunt.py::test_pointwise_ops_of_the_jagged_layout_match_torch",
    "tests/nested/test_nested_hunt.py::test_pointwise_ops_of_the_jagged_layout_on_numpy",
    "tests/nested/test_nested_hunt.py::test_where_method_takes_the_condition_first_like_torch",
    "tests/nested/test_nested_hunt2.py::test_binary_ops_take_a_zero_dim_tensor_like_torch",
    "tests/nested/test_nested_hunt2.py::test_from_jagged_with_offsets_over_part_of_values_matches_torch",
    "tests/nested/test_nested_hunt2.py::test_masked_select_broadcasts_the_mask_like_torch",
    "tests/nested/test_nested_hunt2.py::test_reductions_over_several_dims_match_torch",
    "tests/nested/test_nested_hunt2.py::test_rms_norm_default_eps_matches_torch",
    "tests/nested/test_nested_hunt2.py::test_strided_product_contracting_the_ragged_dim_stays_nested",
    "tests/nested/test_nested_hunt2.py::test_to_takes_copy_and_non_blocking_like_torch",
    "tests/nested/test_nested_hunt2.py::test_values_and_gradients_match_torch_jagged",
    "tests/nested/test_nested_hunt2.py::test_values_of_a_transposed_view_match_torch",
    "tests/nested/test_operators_and_casts.py::test_matmul_with_a_dense_batch_linear_with_a_vector_and_reshape_of_minus_one",
    "tests/nested/test_operators_and_casts.py::test_nested_operands_broadcast_their_size_one_dims",
    "tests/nested/test_operators_and_casts.py::test_permute_matches_torch",
    "tests/nested/test_operators_and_casts.py::test_products_and_reductions_that_contract_the_ragged_dim_are_dense_as_torch",
    "tests/nested/test_shape_ops.py::test_from_jagged_with_holes_matches_torch",
    "tests/nested/test_shape_ops.py::test_masked_select_matches_torch",
    "tests/nested/test_shape_ops.py::test_random_lengths_match_jagged",
    "tests/nested/test_shape_ops.py::test_shape_ops_match_jagged",
    "tests/nested/test_shape_symbolic.py::test_indexing_matches_torch_jagged",
    "tests/nested/test_shape_symbolic.py::test_runtime_errors_where_torch_raises_them",
}


#: the oldest torch release whose dynamo traces LoDTensor and NestedTensor code into one graph
#: (torch.compile with fullgraph=True, the tests' graph and frame counts): the tests below skip before it.
#: Checked on PyPI's releases (docs/compatibility.md): 2.12.1 and 2.13 pass (2.15 too), but for the
#: cases of COMPILE_CASE_RELEASES; 2.9 to 2.11 trace no ``bool`` of a list; 2.4 and 2.8 no generator, no
#: ``object.__new__`` and no operator on a LoDTensor. There compiled functions give eager mode's values, with
#: more graphs, and fullgraph=True raises Unsupported (docs/nested.md, "torch.compile"). It is apart from
#: JAGGED_ORACLE_RELEASE: the two need not move together.
COMPILE_RELEASE = (2, 12)
#: the one-graph tests (a file: all its tests).
COMPILE_TESTS = {
    "tests/test_compile_lod.py",
    "tests/nested/test_compile.py",
    "tests/nested/test_fast_paths.py::test_max_over_the_ragged_dim_against_torch_jagged",
    "tests/test_compile_hunt2.py::test_fc_compiles_once_for_every_lod",
    "tests/test_compile_hunt2.py::test_fc_module_with_fullgraph_on_a_parameter_type_not_seen_before",
}
#: one-graph test cases (a test id with its parameters) that need a newer dynamo than COMPILE_RELEASE's:
#: their floor and why. torch 2.12's dynamo compares ``0 < t`` through a polyfill (``polyfills.cmp_lt``) that
#: calls ``int.__lt__`` only and raises TypeError on its NotImplemented, never trying ``t.__gt__(0)`` as Python
#: does; 2.13 does. The expression is the caller's: lodtensor cannot spell it otherwise.
COMPILE_CASE_RELEASES = {
    "tests/test_compile_lod.py::test_operators_and_functions_match_eager_in_one_graph[0 < t]": (
        (2, 13), "torch {}'s dynamo tries the reflected comparison of an int with an object; torch {}'s raises "
                 "TypeError on int.__lt__'s NotImplemented"),
}


def torch_release():
    """The installed torch's (major, minor), or None without torch (never imports it)."""
    import importlib.metadata  # noqa: PLC0415

    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(part) for part in version.split("+")[0].split(".")[:2])


def older_oracle_skips(items):
    """Skip each collected test that needs a newer torch than the installed one: its oracle is torch's
    jagged layout (JAGGED_ORACLE_TESTS, before JAGGED_ORACLE_RELEASE), or it takes torch.compile's one
    graph (COMPILE_TESTS, a file or a test, before COMPILE_RELEASE; COMPILE_CASE_RELEASES, a case, before its
    own floor)."""
    import pytest  # noqa: PLC0415

    release = torch_release()
    if release is None:
        return
    needs = ((JAGGED_ORACLE_RELEASE, JAGGED_ORACLE_TESTS,
              "its oracle is torch {}'s jagged layout; torch {}'s lacks or differs in its ops"),
             (COMPILE_RELEASE, COMPILE_TESTS,
              "one-graph tracing under torch.compile needs torch {}'s dynamo; torch {}'s breaks graphs inside "
              "lodtensor (same values)"))
    skips = [(tests, pytest.mark.skip(reason=why.format(*(".".join(map(str, r)) for r in (floor, release)))))
             for floor, tests, why in needs if release < floor]
    skips += [({case}, pytest.mark.skip(reason=why.format(*(".".join(map(str, r)) for r in (floor, release)))))
              for case, (floor, why) in COMPILE_CASE_RELEASES.items() if release < floor]
    for item in items:
        test = item.nodeid.split("[")[0]
        for tests, mark in skips:
            if item.nodeid in tests or test in tests or test.split("::")[0] in tests:
                item.add_marker(mark)
                break
