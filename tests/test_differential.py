"""Differential tests: every program compiled by @px.compile gives what plain Python gives, on every runtime."""
from __future__ import annotations

import collections
import types

import numpy as np
import prog_basic
import prog_calls
import prog_config
import prog_control
import prog_imports
import prog_loops
import prog_numpy
import pytest
from helpers import check, check_against, compiled

import phylanx_py as px

# every test here runs with the native loop tier as by default and forced (conftest.native_tier)
pytestmark = pytest.mark.usefixtures("native_tier")

# Every program of the prog_* modules as ``p.<name>``.
p = types.SimpleNamespace(**{name: obj for m in (prog_basic, prog_control, prog_calls, prog_numpy, prog_imports)
                             for name, obj in vars(m).items() if callable(obj) and not name.startswith("__")})
_counts: collections.Counter = collections.Counter()


def case(fn, *args, **kwargs):
    _counts[fn.__name__] += 1
    return pytest.param(fn, args, kwargs, id=f"{fn.__name__}-{_counts[fn.__name__]}")


def _rng(seed=0):
    return np.random.default_rng(seed)


A2 = np.array([[1.0, 2.0], [3.0, 4.0]])
B2 = np.array([[0.0, 1.0], [5.0, -2.0]])
A23 = np.arange(6.0).reshape(2, 3)

LITERALS_AND_OPERATORS = [
    case(p.lit_int), case(p.lit_float), case(p.lit_bool), case(p.lit_none), case(p.lit_str), case(p.lit_mixed),
    case(p.arith, 7, 3), case(p.arith, -7, 3), case(p.arith, 7.5, -2.0), case(p.arith, 7, 2.0),
    case(p.arith, np.array([1.0, -2.5, 3.0]), 2.0), case(p.arith, np.array([7, -7, 4]), np.array([2, 3, 1])),
    case(p.arith_pow_neg, 2), case(p.arith_pow_neg, 4.0), case(p.arith_mixed_types, 3, 2.0),
    case(p.unary, 5, 2.5), case(p.unary, 0, -0.5), case(p.unary, True, False),
    case(p.unary_array, np.array([1, -2, 3]), np.array([True, False])),
    case(p.compare_basic, 1, 2), case(p.compare_basic, 2, 2), case(p.compare_basic, 2.5, 1),
    case(p.compare_basic, "a", "b"),
    case(p.compare_chained, 1, 2, 3), case(p.compare_chained, 1, 3, 2), case(p.compare_chained, 2, 2, 2),
    case(p.compare_chained, 3, 2, 1),
    case(p.chain_call_once, 5), case(p.chain_call_once, -1), case(p.chain_call_once, 20),
    case(p.chain_short_circuit, -1), case(p.chain_short_circuit, 3),
    case(p.compare_arrays, np.array([1, 2, 3]), np.array([3, 2, 1])),
    case(p.or_default, 0), case(p.or_default, 3), case(p.or_default, None), case(p.or_default, "x"),
    case(p.and_short, 0), case(p.and_short, []), case(p.or_short, 3), case(p.or_short, "yes"),
    case(p.bool_operand_values, 0, 2), case(p.bool_operand_values, 1, 0), case(p.bool_operand_values, [1], ""),
    case(p.is_none, None), case(p.is_none, 4),
    case(p.membership, [1, 2, 3], {"k": 3, "j": 1}, "hello"), case(p.membership, [7], {}, "quiz"),
]

ASSIGNMENT = [
    case(p.fib_unpack, 0), case(p.fib_unpack, 10), case(p.nested_unpack, ((1, (2, 3)), 4)),
    case(p.nested_unpack, [[5, [6, 7]], 8]),
    case(p.aug_int, 4), case(p.aug_int, -9), case(p.aug_float, 1.0),
    case(p.aug_array_alias, np.array([1, 2, 3])), case(p.aug_array_alias, np.array([[0.5, 1.5]])),
    case(p.aug_float_array_alias, np.array([1.0, 2.0])), case(p.plain_binop_no_alias, np.array([1, 2])),
    case(p.aug_list_alias, [0]), case(p.aug_tuple_rebinds, (1, 2)),
    case(p.setitem_array, np.zeros(4), 2, 7.5), case(p.setitem_array, np.zeros((2, 2), dtype=np.int64), 1, 3),
    case(p.slice_aug, np.arange(5)), case(p.slice_aug, np.arange(5.0)),
    case(p.mask_assign, np.array([1, 5, 2, 3])), case(p.mask_assign, np.array([[3.0, 1.0], [0.0, 9.0]])),
    case(p.tuple_index_aug, np.zeros((2, 3)), 1, 2), case(p.tuple_index_aug, np.ones((3, 3), dtype=np.int32), 0, 0),
    case(p.dict_setitem, {"a": 1}, "b", 2), case(p.dict_setitem, {"a": 1}, "a", 5),
    case(p.list_setitem, [1, 2, 3], 0, 10), case(p.list_setitem, [1, 2, 3], -2, "x"),
    case(p.multi_target), case(p.multi_target_alias), case(p.walrus, [1, 2, 3]), case(p.walrus, [1]),
    case(p.walrus_loop), case(p.annotated, 1),
]

CONTROL_FLOW = [
    case(p.classify, -3), case(p.classify, 0), case(p.classify, 5), case(p.classify, 50.5),
    case(p.if_no_else, 1), case(p.if_no_else, 5), case(p.ternary, 3), case(p.ternary, -2.5),
    case(p.while_else, 5, 2), case(p.while_else, 5, 9), case(p.while_else, 0, 0),
    case(p.range_forms, 6), case(p.range_forms, 1), case(p.iter_list, [1, 2, 3.5]), case(p.iter_list, []),
    case(p.iter_tuple, ("a", "b", "c")), case(p.iter_array_rows, A23), case(p.iter_array_rows, np.eye(3, dtype=int)),
    case(p.iter_dict_keys, {"z": 1, "a": 2, 3: 4}), case(p.iter_zip, [1, 2, 3], [4, 5]),
    case(p.iter_zip, np.arange(3), [1.5, 2.5, 3.5]), case(p.iter_enumerate, ["a", "b"]),
    case(p.iter_items, {"x": 1, "y": 2.5}), case(p.loop_variable_after, 4),
    case(p.find_in_grid, [[1, 2], [3, 4]], 4), case(p.find_in_grid, [[1, 2], [3, 4]], 9),
    case(p.return_in_while_in_for, 5), case(p.return_in_while_in_for, 1),
    case(p.break_continue, 20), case(p.nested_break, 5), case(p.while_continue, 9),
    case(p.return_both_branches, 4), case(p.return_both_branches, -4),
    case(p.for_else, [1, 2, 3], 2), case(p.for_else, [1, 2, 3], 7), case(p.for_else, [], 7),
    case(p.pass_stmt, 0), case(p.pass_stmt, 5), case(p.assert_ok, 5), case(p.no_return, [0]),
    case(p.bare_return, 1), case(p.bare_return, 0),
]

CALLS = [
    case(p.calls_kw, 1), case(p.defaults_entry, 1), case(p.defaults_entry, 1, 2), case(p.defaults_entry, 1, scale=3),
    case(p.defaults_entry, a=1, b=5, scale=0), case(p.kwonly_required, 1, key="k"),
    case(p.fib_rec, 0), case(p.fib_rec, 15), case(p.factorial, 0), case(p.factorial, 20), case(p.factorial, 25),
    case(p.even_odd, 0), case(p.even_odd, 7), case(p.even_odd, 30), case(p.calls_compiled, 7),
    case(p.calls_compiled, np.array([1.0, 2.0])), case(p.calls_transitive, np.array([3.0, 4.0])),
    case(p.lambda_assigned, 1), case(p.lambda_immediate, 41), case(p.lambda_default, 3),
    case(p.closure_late_binding, 2), case(p.nested_def, 4), case(p.nested_def_recursive, 10),
    case(p.closure_factory, 5), case(p.closure_reads_updated, 3),
    case(p.apply_fn, lambda x: x * 2 + 1, 3), case(p.apply_fn, lambda x: x[::-1], [1, 2, 3]),
    case(p.apply_fn, p.double, 21), case(p.apply_fn, np.sqrt, np.array([4.0, 9.0])),
    case(p.apply_twice, lambda v: v + 10, 1), case(p.apply_twice, p.double, np.arange(3)),
    case(p.map_with, lambda x: x * x, [1, 2, 3]), case(p.sort_with_key, [3, 1, 2]),
]

BUILTINS = [
    case(p.builtins_numeric, [3, 1, 2]), case(p.builtins_numeric, [1.5, -2.0]),
    case(p.builtins_conversions, 2.7), case(p.builtins_conversions, 0), case(p.builtins_containers, [3, 1, 2]),
    case(p.builtins_misc, 5), case(p.builtins_misc, 2.5), case(p.builtins_misc, True), case(p.builtins_misc, 0),
    case(p.builtins_on_arrays, np.array([2.5, -1.0, 3.0])),
]

CONTAINERS = [
    case(p.literals_containers, 3), case(p.listcomp_filter, [1, 2, 3, 4, 6]), case(p.listcomp_filter, []),
    case(p.listcomp_two_filters, list(range(8))), case(p.listcomp_multi, 5),
    case(p.listcomp_shadow, [1, 2, 3]), case(p.listcomp_shadow_outer, [1, 2]), case(p.listcomp_captures, [1, 2], 3),
    case(p.dict_comp, [1, 2, 3]), case(p.set_comp, [1, 2, 3, 4, 5]), case(p.genexp_args, [0, 1, 2, 5]),
    case(p.list_methods, [1, 2, 3]), case(p.list_ops, [1, 3, 1]), case(p.dict_methods, {"a": 1, "b": 2}),
    case(p.tuple_ops, (4, 5)), case(p.string_ops, "a,b,ca"), case(p.fstrings, 3.14159, "pi"),
    case(p.fstrings, 7, "seven"), case(p.nested_containers, 3),
]

NUMPY = [
    case(p.np_functions, np.array([0.25, -1.0, 2.0])), case(p.np_aliases, np.array([0.5, -1.5])),
    case(p.local_import_numpy, np.array([0.5, 1.5])), case(p.local_from_imports, np.array([3.0, 4.0])),
    case(p.local_import_submodule, np.array([1.0, -2.0])), case(p.local_import_loop, np.linspace(0.0, 2.0, 50)),
    case(p.local_import_module_data, np.ones(4)), case(p.local_import_in_nested_function, np.array([0.5, 2.0])),
    case(p.np_linalg, np.array([[4.0, 1.0], [2.0, 3.0]]), np.array([1.0, 2.0])), case(p.np_creation, 4),
    case(p.array_attributes, A23), case(p.array_attributes, np.arange(4, dtype=np.int32)),
    case(p.array_methods, A23), case(p.array_methods, np.arange(6).reshape(2, 3)),
    case(p.array_copy_independent, np.arange(3)), case(p.array_indexing, np.arange(12).reshape(3, 4)),
    case(p.var_named_e), case(p.var_named_e_param, 1), case(p.var_named_sum, [1, 2, 3]), case(p.var_named_array),
    case(p.var_named_like_numpy, 2), case(p.matmul_vs_mul, A2, B2), case(p.matmul_vs_mul, np.eye(2, dtype=int), B2),
    case(p.broadcasting, np.arange(3.0), np.array([1.0, 2.0, 3.0])),
    case(p.dtype_promotion, np.array([1, 2, 3], dtype=np.int32), 0.5),
    case(p.dtype_promotion, np.array([1, 2, 3], dtype=np.int64), np.float32(0.5)),
    case(p.int_array_true_divide, np.array([7, -7, 8]), np.array([2, 2, 4])), case(p.int_array_true_divide, 7, 2),
    case(p.neg_division_ints, 7, 2), case(p.neg_division_ints, 7, -2), case(p.neg_division_ints, 7.5, 2),
    case(p.neg_division_literals), case(p.neg_division_arrays, np.array([-7, -3, 5, 0])),
    case(p.neg_division_arrays, np.array([-7.5, 3.25])),
    case(p.rng_streams, 0), case(p.rng_streams, 12345), case(p.rng_in_loop, 3, 5),
    case(p.numpy_scalars, np.array([1.5, 2.0])), case(p.numpy_scalars, np.array([3, 4])),
]


def _lra_data():
    rng = _rng(1)
    X = rng.standard_normal((40, 3))
    y = (X @ np.array([1.0, -2.0, 0.5]) > 0).astype(np.float64)
    return X, y


def _kmeans_data():
    rng = _rng(2)
    pts = np.concatenate([rng.normal(0, 0.5, (10, 2)), rng.normal(5, 0.5, (10, 2))])
    return pts, pts[[0, 10]].copy()


REALISTIC = [
    case(p.lra, *_lra_data(), 0.1, 20), case(p.kmeans, *_kmeans_data(), 3),
    case(p.power_iteration, np.array([[2.0, 1.0], [1.0, 3.0]]), 25),
    case(p.jacobi_1d, np.r_[1.0, np.zeros(8), 0.0], 10),
    case(p.softmax, np.array([1.0, 2.0, 3.0])), case(p.softmax, _rng(3).standard_normal((3, 4))),
    case(p.standardize, _rng(4).standard_normal((6, 3))), case(p.mandelbrot_count, -0.5, 0.5, 50),
    case(p.mandelbrot_count, 0.3, 0.6, 50), case(p.mandelbrot_grid, 6, 4, 20),
    case(p.bubble_sort, [5, 1, 4, 2, 8, 0]), case(p.bubble_sort, [1.5, -2.0]), case(p.bubble_sort, []),
    case(p.sieve, 50), case(p.sieve_numpy, 50), case(p.fib_list, 15), case(p.fib_list, 1),
]

LARGE = [
    case(p.big_inplace_ordering, np.linspace(0.0, 1.0, 300 * 300)),
    case(p.big_chain, _rng(5).standard_normal((300, 300)), 4),
    case(p.big_list_of_arrays, np.ones(70_000)),
]

MORE_SCALAR_SEMANTICS = [
    case(p.pow_negative_base, -4), case(p.pow_negative_base, 9.0), case(p.big_ints, 70), case(p.big_ints, 3),
    case(p.float_specials), case(p.string_operators, "ab", 3), case(p.string_operators, "", 0),
    case(p.truthiness, [], {}, ""), case(p.truthiness, [0], {0: 0}, " "), case(p.compare_mixed, 1, 1.0),
    case(p.compare_mixed, 2, 1.5), case(p.bitwise, 12, 10), case(p.bitwise, -5, 3),
    case(p.chained_with_arrays_elementwise, np.array([-1, 1, 2, 5])), case(p.constant_membership),
]

MORE_CONTROL_FLOW = [
    case(p.loop_mutating_list, [1, 5, 2]), case(p.loop_index_update, [1, 2.5, "a"]),
    case(p.nested_unpack_in_for, {"a": 1, "b": [2]}), case(p.range_step_variants, 5),
    case(p.while_converge, 1.0, 1e-12), case(p.early_exit_from_triple_loop, 4), case(p.early_exit_from_triple_loop, 0),
    case(p.else_after_continue, [1, 2, 3, 4]), case(p.while_true_break, 10),
]

MORE_CALLS = [
    case(p.reads_global, 2), case(p.default_from_global, 2), case(p.default_from_global, 2, 4),
    case(p.shadow_builtins, [1, 2]), case(p.map_filter, [1, 2, 3, 4]),
    case(p.min_max_key, [(1, "b"), (0, "z"), (2, "a")]), case(p.bound_method_as_key, {"x": 3, "y": 1, "z": 2}),
    case(p.method_as_value, ["Ab", "cD"]), case(p.walrus_in_comprehension, [1, 2, 3]),
    case(p.comprehension_does_not_leak, [1, 2]), case(p.nested_closure_counter, 5), case(p.late_binding_def, 4),
    case(p.closures_in_loop, 3), case(p.recursive_sum, [1, 2, 3, 4]), case(p.ackermann, 2, 3),
    case(p.deep_recursion, 500), case(p.compiled_with_kwargs, 3), case(p.dict_building, ["a", "b"], [1, 2]),
    case(p.list_misc, [3, 1, 2]), case(p.math_module, 10.0), case(p.round_variants, 2.675),
    case(p.round_variants, -1.5), case(p.shadow_in_inner_def, 1), case(p.lambda_param_shadows, 3),
    case(p.comprehension_nested_reference, 4), case(p.walrus_in_nested_comprehension, [1, 2]),
    case(p.closure_sees_later_assignment), case(p.nested_default_evaluated_at_def, 3),
    case(p.recursion_with_accumulator, 4, []), case(p.nested_kwonly), case(p.calls_positional_only, 1),
    case(p.python_misc, [1, 2, 3]),
]

MORE_NUMPY = [
    case(p.float32_promotion, np.array([1.0, 2.5], dtype=np.float32)),
    case(p.uint8_wraparound, np.array([250, 3], dtype=np.uint8)), case(p.np_keyword_calls, A23),
    case(p.array_in_and_truth, np.array([1, 2, 3])), case(p.array_in_and_truth, np.array([-1.0])),
    case(p.numpy_scalar_types, np.array([3, 4], dtype=np.int64)), case(p.array_loop_accumulate, A23),
    case(p.int_division_mixed, np.array([7, -7, 3])), case(p.where_and_masks, np.array([3.0, -1.0, 0.5, -2.0])),
    case(p.outer_products, np.array([1.0, 2.0]), np.array([3.0, -1.0])),
    case(p.numpy_python_interplay, np.array([1.5, 2.25])),
    case(p.index_walks, np.arange(6.0).reshape(2, 3), (2, 2)), case(p.index_walks, np.arange(4.0), (3,)),
    # matrix products inside loops (native forms when forced: Numba's np.dot)
    case(prog_loops.cholesky_dot, np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])),
    case(prog_loops.lu_matmul, np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])),
    case(prog_loops.matvec_steps, np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 0.0]), 4),
    # arrays stored into views in a loop: same shape, broadcast, more dimensions (native: _px_assign loops)
    case(prog_loops.rows_from_products, np.arange(12.0).reshape(4, 3) / 7, np.arange(15.0).reshape(3, 5) / 3,
         np.zeros((4, 5)), np.zeros((3, 5)), 2),
    # in-place updates of views (rows, row slices) and of elements in a loop (native: the view's store left out)
    case(prog_loops.update_rows_in_place, 1.5, 1.2, np.arange(16.0).reshape(4, 4) / 7,
         np.arange(12.0).reshape(4, 3) / 5),
    # NEP 50: Python int operands of small-int arithmetic (native forms when forced: cast, checked to fit)
    case(prog_loops.crc16, np.array([0, 1, 49, 127, 128, 255], dtype=np.uint8)),
    case(prog_loops.small_int_plus_int, np.array([0, 200, 255], dtype=np.uint8), 100),
    case(prog_loops.small_int_below_int, np.array([-5, 0, 7], dtype=np.int8), 300),
    # a 1-D array indexed by an int array, np.empty(n, a.dtype) (native forms when forced: _px_take, a.dtype)
    case(prog_loops.spmv, np.array([0, 2, 2, 4], dtype=np.uint32), np.array([1, 0, 2, 1], dtype=np.uint32),
         np.array([1.5, -2.0, 0.25, 4.0]), np.array([3.0, 1.0, -1.0])),
    case(prog_loops.gather_sum, np.arange(5.0), np.array([-1, 0, -5, 2])),
    # arrays flipped, copied and allocated alike (native forms when forced, any dtype)
    case(prog_loops.durbin, np.array([0.1, 0.05, 0.02, 0.01, 0.003])),
    case(prog_loops.moved_arrays, np.arange(-3, 3, dtype=np.int8)),
    case(prog_loops.moved_arrays, np.arange(6.0).reshape(2, 3)),
    case(prog_loops.store_through_flip, np.arange(4.0), 3),
    # calls of functions whose body is one returned expression (native forms when forced: inlined)
    case(prog_loops.nussinov, 7, np.array([0, 3, 1, 2, 2, 1, 3], dtype=np.int32)),
    case(prog_loops.weighted_sum, np.linspace(-1.0, 3.0, 5), np.float64(0.5)),
    case(prog_loops.guarded_call, np.linspace(0.0, 3.0, 4), 6),
    # array arithmetic in float32 and small ints (native forms when forced: scalars cast to the arrays' dtype)
    case(prog_loops.relu_steps, np.linspace(-1, 1, 5, dtype=np.float32), np.float32(0.3),
         np.linspace(0, 1, 5, dtype=np.float32)),
    case(prog_loops.small_int_arrays, np.arange(0, 200, 40, dtype=np.uint8), 9),
    case(prog_loops.float32_compared, np.array([[0.1, 0.2], [0.05, 0.1]], dtype=np.float32)),
    case(prog_loops.float32_inplace, np.linspace(0, 1, 5, dtype=np.float32), np.float32(1.7)),
    case(prog_loops.mixed_array_dtypes, np.ones(3, np.float32), np.ones(3, np.int32)),
    # np.add.outer (subtract, multiply) of 1-D arrays (native forms when forced)
    case(prog_loops.floyd_warshall, np.array([[0, 3, 9], [2, 0, 1], [7, 4, 0]], dtype=np.int32)),
    case(prog_loops.outer_products_of_rows, np.arange(6.0).reshape(2, 3), np.arange(4.0).reshape(2, 2)),
    case(prog_loops.centred_rows, np.array([[0.1, 0.7, 2.5], [1e8, 1.0, -1e8]])),
    case(prog_loops.centred_rows, np.array([[0.1, 0.7, 2.5]], dtype=np.float32)),
    case(prog_loops.linspace_rows, np.zeros((2, 5)), 0.1, 0.7),
    case(prog_loops.small_int_divided, np.array([1, 2, 7], dtype=np.int8), np.zeros(3)),
    case(prog_loops.complex_rows, np.arange(6.0).reshape(3, 2) * (1 + 2j), np.full((3, 2), 0.5 - 1j),
         np.zeros((3, 2), complex)),
    case(prog_loops.complex_products, np.arange(12.0).reshape(3, 2, 2) * (1 - 1j), np.ones((3, 2, 2)) * 1j,
         np.zeros((3, 2, 2), complex)),
    case(prog_loops.complex_compared, np.array([[1 + 1j, 1 + 1j], [2j, 1.0]]), np.zeros((2, 2), complex)),
    case(prog_loops.complex_row_quotients, np.array([[1 + 1j, 2.0]]), np.array([[0j, 1j]]),
         np.zeros((1, 2), complex)),
]

BIG = np.linspace(-1.0, 1.0, 70_000)
MORE_LARGE = [
    case(p.big_setitem_on_future, BIG), case(p.big_alias_inplace, BIG), case(p.big_list_mutation, BIG),
    case(p.big_dict_of_arrays, BIG), case(p.big_fill_after_read, BIG), case(p.big_while_condition, np.abs(BIG)),
    case(p.big_future_in_python_ops, np.abs(BIG)), case(p.big_rows, BIG), case(p.big_mask_assign, BIG),
    case(p.big_early_return, np.abs(BIG)), case(p.big_random, 7),
    case(p.big_membership_on_future, np.arange(70_000.0)), case(p.big_sort_list_of_futures, np.abs(BIG)),
    case(p.big_remove_future_from_list, np.abs(BIG)), case(p.big_futures_in_containers, np.abs(BIG)),
]

ALL = (LITERALS_AND_OPERATORS + ASSIGNMENT + CONTROL_FLOW + CALLS + BUILTINS + CONTAINERS + NUMPY + REALISTIC + LARGE
       + MORE_SCALAR_SEMANTICS + MORE_CONTROL_FLOW + MORE_CALLS + MORE_NUMPY + MORE_LARGE)


@pytest.mark.parametrize(("fn", "args", "kwargs"), ALL)
def test_compiled_equals_plain(runtime, fn, args, kwargs):
    check(fn, *args, **kwargs)


@pytest.mark.parametrize(("fn", "args", "kwargs"), ALL)
def test_compiled_without_optimization_equals_plain(fn, args, kwargs):
    """The passes change no result: the unoptimised tree (no folding, no dead-code removal) agrees too."""
    with px.runtime.synchronous() as rt, px.using(rt):
        check_against(px.compile(fn, optimize=False), fn, *args, **kwargs)


@pytest.fixture(scope="module")
def all_tasks_runtime():
    """A thread pool that runs every array primitive as a task (no inline threshold): futures everywhere."""
    rt = px.runtime.local(inline_elements=0)
    yield rt
    rt.close()


@pytest.mark.parametrize(("fn", "args", "kwargs"), ALL)
def test_compiled_equals_plain_with_every_array_op_a_task(all_tasks_runtime, fn, args, kwargs):
    with px.using(all_tasks_runtime):
        check(fn, *args, **kwargs)


def test_short_circuit_skips_failing_call(runtime):
    # ``0 and _boom()`` must not evaluate _boom (it divides by zero); ``3 or _boom()`` neither.
    assert compiled(p.and_short)(0) == 0
    assert compiled(p.or_short)(3) == 3


def test_print_output_matches(runtime, capsys):
    want = p.printing(3, "n")
    plain_out = capsys.readouterr().out
    got = compiled(p.printing)(3, "n")
    compiled_out = capsys.readouterr().out
    assert got == want
    assert compiled_out == plain_out


def test_print_in_loop_keeps_order(runtime, capsys):
    def run(fn):
        fn(np.arange(4.0), 3)
        return capsys.readouterr().out

    assert run(compiled(print_loop)) == run(print_loop)


def print_loop(a, n):
    for i in range(n):
        a = a * 2
        print(i, a.sum())


def test_failing_assert_raises_execution_error(runtime):
    with pytest.raises(AssertionError) as plain:
        p.assert_fails(-2)
    with pytest.raises(px.ExecutionError) as err:
        compiled(p.assert_fails)(-2)
    cause = err.value.__cause__
    assert type(cause) is AssertionError
    assert str(cause) == str(plain.value) == "x must be positive, got -2"


def test_lazy_result_equals_plain(runtime):
    X, y = _lra_data()
    fut = compiled(p.lra).lazy(X, y, 0.1, 20)
    np.testing.assert_allclose(fut.result(timeout=60), p.lra(X, y, 0.1, 20), rtol=1e-12, atol=0)
    assert fut.done()
    assert compiled(p.fib_rec).lazy(12).result(timeout=60) == p.fib_rec(12)


def test_lazy_calls_run_concurrently_and_independently(runtime):
    futs = [compiled(p.factorial).lazy(n) for n in range(10)]
    assert [f.result(timeout=60) for f in futs] == [p.factorial(n) for n in range(10)]


def _type_error(fn, *args, **kwargs) -> str:
    with pytest.raises(TypeError) as err:
        fn(*args, **kwargs)
    return str(err.value)


@pytest.mark.parametrize(
    ("fn", "args", "kwargs"),
    [
        case(p.arith, 1),  # missing one
        case(p.arith),  # missing two
        case(p.arith, 1, 2, 3),  # too many
        case(p.arith, 1, 2, c=3),  # unknown keyword
        case(p.arith, 1, a=2),  # twice
        case(p.defaults_entry, 1, 2, 3),  # keyword-only passed by position
        case(p.kwonly_required, 1),  # missing keyword-only
    ],
)
def test_wrong_arguments_raise_pythons_type_error(runtime, fn, args, kwargs):
    assert _type_error(compiled(fn), *args, **kwargs) == _type_error(fn, *args, **kwargs)


def test_wrong_arguments_to_transitive_call_raise_pythons_message(runtime):
    with pytest.raises(TypeError) as plain:
        wrong_call(1)
    with pytest.raises((TypeError, px.ExecutionError)) as err:
        compiled(wrong_call)(1)
    exc = err.value
    if isinstance(exc, px.ExecutionError):
        exc = exc.__cause__
    assert type(exc) is TypeError
    assert str(exc) == str(plain.value)


def wrong_call(x):
    return prog_basic.arith(x)


def test_lazy_wrong_arguments_raise_pythons_type_error(runtime):
    assert _type_error(compiled(p.arith).lazy, 1) == _type_error(p.arith, 1)


def test_lambda_defined_in_a_test_function(runtime):
    offset = 7
    add = lambda x: x + offset  # a closure over this frame, compiled when passed in
    assert check(p.apply_fn, add, 3) == 10
    assert check(p.map_with, lambda v: [v] * 2, [1, 2]) == [[1, 1], [2, 2]]


RAISES = [
    case(p.unbound_local, False), case(p.unpack_mismatch, [1, 2, 3]), case(p.unpack_mismatch, [1]),
    case(p.missing_key, {"a": 1}), case(p.add_str_int, "s"), case(p.raise_value_error, -2),
    case(p.chained_array_truth, np.array([1, 2])), case(p.arith, 1, 0), case(p.iter_list, 5),
    case(p.builtins_conversions, "x"),
    case(prog_loops.small_int_plus_int, np.array([1, 2], dtype=np.uint8), 256),
    case(prog_loops.small_int_plus_int, np.array([1, 2], dtype=np.int16), -40000),
    case(prog_loops.small_int_arrays, np.array([1, 2], dtype=np.int8), 300),
    case(prog_loops.rows_from_products, np.ones((4, 3)), np.ones((3, 5)), np.zeros((4, 5)), np.zeros((3, 5)), 3),
]


@pytest.mark.parametrize(("fn", "args", "kwargs"), RAISES)
def test_same_exception_as_plain(runtime, fn, args, kwargs):
    """A program that fails in Python fails compiled with an ExecutionError chained to the same exception."""
    with pytest.raises(Exception) as plain:
        fn(*args, **kwargs)
    with pytest.raises(px.ExecutionError) as err:
        compiled(fn)(*args, **kwargs)
    cause = err.value.__cause__
    assert type(cause) is type(plain.value)
    assert str(cause) == str(plain.value)
    assert err.value.lineno == plain.value.__traceback__.tb_next.tb_lineno


def test_globals_are_read_at_call_time(runtime):
    f = compiled(prog_calls.reads_global)
    try:
        prog_calls.SCALE = 5
        assert f(2) == prog_calls.reads_global(2) == 10
    finally:
        prog_calls.SCALE = 3
    assert f(2) == 6


def test_module_attributes_are_read_at_call_time(runtime):
    """``module.NAME`` data is read when the line runs, as Python does, not frozen when the function compiles."""
    f = compiled(prog_calls.reads_module_attribute)
    assert f(2) == (6, 2)
    saved = prog_config.SCALE, prog_config.TABLE
    try:
        prog_config.SCALE, prog_config.TABLE = 10, [1, 2, 3]
        assert f(2) == prog_calls.reads_module_attribute(2) == (20, 3)
    finally:
        prog_config.SCALE, prog_config.TABLE = saved


def test_global_list_mutated_in_place(runtime):
    prog_calls.HISTORY.clear()
    f = compiled(prog_calls.appends_to_global)
    assert (f("a"), f("b")) == (1, 2)
    assert prog_calls.HISTORY == ["a", "b"]
    prog_calls.HISTORY.clear()


def test_compiled_called_from_plain_python_in_a_loop(runtime):
    f = compiled(p.fib_unpack)
    assert [f(n) for n in range(12)] == [p.fib_unpack(n) for n in range(12)]


@pytest.mark.timeout(120)
def test_concurrent_calls_of_one_compiled_function(runtime):
    """Several threads share one compiled function (and its call sites) on one runtime."""
    import threading

    f = compiled(p.big_chain)
    inputs = [_rng(10 + i).standard_normal((300, 300)) for i in range(4)]
    results: list = [None] * 4

    def work(i):
        results[i] = f(inputs[i], 3)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=100)
    for i in range(4):  # to float tolerance: the fused kernel may round its last bit differently
        np.testing.assert_allclose(results[i][0], p.big_chain(inputs[i], 3)[0], rtol=1e-12)
        assert results[i][1:] == p.big_chain(inputs[i], 3)[1:]


def test_disable_runs_the_plain_function(runtime):
    f = px.compile(p.factorial, disable=True)
    assert f(10) == p.factorial(10)
    assert f.lazy(5).result(timeout=60) == 120


def test_compile_rejects_non_functions():
    with pytest.raises(TypeError, match="@compile takes a Python function, not int"):
        px.compile(3)
