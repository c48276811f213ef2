/* Fill, copy (with dtype conversion), unary, binary, where and random fills: instances of the
 * elementwise kernel family. */
#include "elementwise.cuh"
#include "math.cuh"
#include "ops.cuh"

tg_status tg_cu_fill(const char *op, const tg_cu_view &out, double value) {
  TG_DISPATCH_ALL_TYPES(out.dtype, op, {
    const scalar_t v = tg_cu_convert_fn<scalar_t, double>{}(value); /* as the CPU converts */
    return tg_cu_nullary<scalar_t>(op, out, tg_cu_fill_fn<scalar_t>{v});
  });
  return TG_OK;
}

template <typename To>
static tg_status copy_to(const char *op, const tg_cu_view &out, const tg_cu_view &src) {
  TG_DISPATCH_ALL_TYPES(src.dtype, op, {
    return tg_cu_unary<To, scalar_t>(op, out, src, tg_cu_convert_fn<To, scalar_t>{});
  });
  return TG_OK;
}

tg_status tg_cu_copy(const char *op, const tg_cu_view &out, const tg_cu_view &src) {
  TG_DISPATCH_ALL_TYPES(out.dtype, op, { return copy_to<scalar_t>(op, out, src); });
  return TG_OK;
}

tg_status tg_cu_unary_op(const char *op, tg_unary_kind kind, double a, double b,
                         const tg_cu_view &out, const tg_cu_view &x) {
  if ((unsigned)kind >= (unsigned)TG_NUM_UNARY)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: unknown unary kind %d", op, (int)kind);
  if (x.dtype != out.dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: input is %s but out is %s", op, tg_dtype_name(x.dtype),
                        tg_dtype_name(out.dtype));
  if (out.dtype == TG_I64) {
    if (!tg_cu_unary_takes_int(kind))
      return tg_set_error(TG_ERR_DTYPE, "%s: unary kind %d does not take int64", op, (int)kind);
    tg_cu_unary_int_fn f{kind, tg__f64_to_i64(a), tg__f64_to_i64(b)};
    return tg_cu_unary<int64_t, int64_t>(op, out, x, f);
  }
  TG_DISPATCH_FLOATING_TYPES(out.dtype, op, {
    tg_cu_unary_fn<scalar_t> f{kind, (scalar_t)a, (scalar_t)b};
    return tg_cu_unary<scalar_t, scalar_t>(op, out, x, f);
  });
  return TG_OK;
}

tg_status tg_cu_binary_op(const char *op, tg_binary_kind kind, double alpha, const tg_cu_view &out,
                          const tg_cu_view &a, const tg_cu_view &b) {
  if ((unsigned)kind >= (unsigned)TG_NUM_BINARY)
    return tg_set_error(TG_ERR_ARGUMENT, "%s: unknown binary kind %d", op, (int)kind);
  if (a.dtype != out.dtype || b.dtype != out.dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: operands are %s and %s but out is %s", op,
                        tg_dtype_name(a.dtype), tg_dtype_name(b.dtype), tg_dtype_name(out.dtype));
  if (out.dtype == TG_I64) {
    if (!tg_cu_binary_takes_int(kind))
      return tg_set_error(TG_ERR_DTYPE, "%s: binary kind %d does not take int64", op, (int)kind);
    tg_cu_binary_int_fn f{kind, tg__f64_to_i64(alpha)};
    return tg_cu_binary<int64_t, int64_t, int64_t>(op, out, a, b, f);
  }
  TG_DISPATCH_FLOATING_TYPES(out.dtype, op, {
    tg_cu_binary_fn<scalar_t> f{kind, (scalar_t)alpha};
    return tg_cu_binary<scalar_t, scalar_t, scalar_t>(op, out, a, b, f);
  });
  return TG_OK;
}

/* A selection, not arithmetic: the branch not taken never reaches out; a NaN cond is
 * nonzero, so it picks a (as a bool cast does). */
template <typename T, typename C> struct tg_cu_where_fn {
  TG_HOST_DEVICE T operator()(C c, T a, T b) const { return c != C(0) ? a : b; }
};

template <typename T>
static tg_status where_with(const char *op, const tg_cu_view &out, const tg_cu_view &cond,
                            const tg_cu_view &a, const tg_cu_view &b) {
  TG_DISPATCH_ALL_TYPES(cond.dtype, op, {
    return tg_cu_ternary<T, scalar_t, T, T>(op, out, cond, a, b, tg_cu_where_fn<T, scalar_t>{});
  });
  return TG_OK;
}

tg_status tg_cu_where(const char *op, const tg_cu_view &out, const tg_cu_view &cond,
                      const tg_cu_view &a, const tg_cu_view &b) {
  if (a.dtype != out.dtype || b.dtype != out.dtype)
    return tg_set_error(TG_ERR_DTYPE, "%s: a is %s and b %s but out is %s (they must agree)", op,
                        tg_dtype_name(a.dtype), tg_dtype_name(b.dtype), tg_dtype_name(out.dtype));
  TG_DISPATCH_ALL_TYPES(out.dtype, op, { return where_with<scalar_t>(op, out, cond, a, b); });
  return TG_OK;
}

tg_status tg_cu_random(const char *op, const tg_cu_view &out, bool normal, uint64_t seed,
                       uint64_t offset, double a, double b) {
  TG_DISPATCH_FLOATING_TYPES(out.dtype, op, {
    tg_cu_random_fn<scalar_t> f{normal, seed, offset, (scalar_t)a, (scalar_t)b};
    return tg_cu_nullary<scalar_t>(op, out, f);
  });
  return TG_OK;
}
