/* PyTorch-style printing: tensor([[...]]) with shared width, summarised beyond 1000 elements. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "device_names.h"
#include "host_memory.h"
#include "internal_assert.h"
#include "tensor_impl.h"

enum { PRINT_THRESHOLD = 1000, EDGE_ITEMS = 3 };

typedef struct strbuf {
  char *data;
  size_t len, cap;
  bool failed;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...) {
  if (sb->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = sb->cap - sb->len;
    int n = vsnprintf(sb->data ? sb->data + sb->len : NULL, sb->data ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      sb->failed = true;
      return;
    }
    if (sb->data && (size_t)n < room) {
      sb->len += (size_t)n;
      return;
    }
    size_t cap = (sb->cap ? sb->cap * 2 : 256) + (size_t)n;
    char *grown = tg__host_realloc(sb->data, cap);
    if (!grown) {
      sb->failed = true;
      return;
    }
    sb->data = grown;
    sb->cap = cap;
  }
}

typedef struct formatter {
  tg_dtype dtype;
  bool integral, scientific;
  int width;
} formatter;

static int format_value(const formatter *f, double v, char *buf, size_t n) {
  if (f->dtype == TG_I64) return snprintf(buf, n, "%lld", (long long)v);
  if (isnan(v)) return snprintf(buf, n, "nan");
  if (isinf(v)) return snprintf(buf, n, v > 0 ? "inf" : "-inf");
  if (f->scientific) return snprintf(buf, n, "%.4e", v);
  if (f->integral) return snprintf(buf, n, "%.0f.", v);
  return snprintf(buf, n, "%.4f", v);
}

typedef struct printer {
  const tg_tensor *t;
  const double *values; /* contiguous, as double */
  bool summarize;
  formatter fmt;
  strbuf *sb;
} printer;

/* Visits the printed elements (honouring summarisation) to size the formatter. */
static void scan(printer *p, int dim, int64_t base, double *lo, double *hi, bool *integral,
                 bool *any) {
  const tg_tensor *t = p->t;
  if (dim == t->ndim) {
    double v = p->values[base];
    if (!isfinite(v)) return;
    double a = fabs(v);
    if (!*any || a > *hi) *hi = a;
    if (a != 0 && (!*any || a < *lo || *lo == 0)) *lo = a;
    if (v != floor(v)) *integral = false;
    *any = true;
    return;
  }
  int64_t n = t->sizes[dim], stride = 1;
  for (int d = dim + 1; d < t->ndim; d++) stride *= t->sizes[d];
  for (int64_t i = 0; i < n; i++) {
    if (p->summarize && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS) i = n - EDGE_ITEMS;
    scan(p, dim + 1, base + i * stride, lo, hi, integral, any);
  }
}

static void emit(printer *p, int dim, int64_t base, int indent) {
  const tg_tensor *t = p->t;
  char buf[64];
  if (dim == t->ndim) {
    format_value(&p->fmt, p->values[base], buf, sizeof buf);
    sb_printf(p->sb, "%*s", p->fmt.width, buf);
    return;
  }
  int64_t n = t->sizes[dim], stride = 1;
  for (int d = dim + 1; d < t->ndim; d++) stride *= t->sizes[d];
  sb_printf(p->sb, "[");
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) {
      if (dim == t->ndim - 1) {
        sb_printf(p->sb, ", ");
      } else {
        sb_printf(p->sb, ",");
        for (int k = 0; k < t->ndim - 1 - dim; k++) sb_printf(p->sb, "\n");
        sb_printf(p->sb, "%*s", indent + 1, "");
      }
    }
    if (p->summarize && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS) {
      sb_printf(p->sb, "...");
      if (dim == t->ndim - 1)
        sb_printf(p->sb, ", ");
      else {
        sb_printf(p->sb, ",");
        for (int k = 0; k < t->ndim - 1 - dim; k++) sb_printf(p->sb, "\n");
        sb_printf(p->sb, "%*s", indent + 1, "");
      }
      i = n - EDGE_ITEMS;
    }
    emit(p, dim + 1, base + i * stride, indent + 1);
  }
  sb_printf(p->sb, "]");
}

static double load_value(tg_dtype dtype, const char *base, int64_t i) {
  switch (dtype) {
  case TG_F32:
    return ((const float *)(const void *)base)[i];
  case TG_F64:
    return ((const double *)(const void *)base)[i];
  default:
    TG_INTERNAL_ASSERT(dtype == TG_I64); /* every entry point validated the dtype */
    return (double)((const int64_t *)(const void *)base)[i];
  }
}

/* The bytes t addresses, readable on the host: the storage itself on the CPU, else a host
 * copy of the span [offset, last element] made by the storage's own copy_bytes (printing
 * runs no op). *base is where element offset 0 of that span is; *copy is what to free. */
static tg_status host_span(const tg_tensor *t, int64_t numel, const char **base, char **copy) {
  size_t es = tg_dtype_size(t->dtype);
  const char *data = (const char *)t->storage->data + t->offset * (int64_t)es;
  *copy = NULL;
  *base = data;
  if (t->storage->device.type == TG_CPU || numel == 0) return TG_OK;
  int64_t last = 0; /* view strides are non-negative */
  for (int d = 0; d < t->ndim; d++) last += (t->sizes[d] - 1) * t->strides[d];
  size_t nbytes = (size_t)(last + 1) * es;
  *copy = tg__host_malloc(nbytes);
  if (!*copy) return tg_set_error(TG_ERR_MEMORY, "tg_to_string: out of memory");
  *base = *copy;
  tg_status st = t->storage->copy_bytes("tg_to_string", *copy, TG_DEVICE_CPU, data,
                                        t->storage->device, nbytes);
  if (st != TG_OK) tg__host_free(*copy), *copy = NULL;
  return st;
}

/* t's elements in row-major order, as doubles (an array of at least one); NULL on error. */
static double *read_values(const tg_tensor *t, int64_t numel) {
  const char *base;
  char *copy;
  if (host_span(t, numel, &base, &copy) != TG_OK) return NULL;
  double *values = tg__host_malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
  if (!values) {
    tg__host_free(copy);
    tg_set_error(TG_ERR_MEMORY, "tg_to_string: out of memory");
    return NULL;
  }
  int64_t index[TG_MAX_DIMS] = {0}, at = 0; /* at: element offset of index in the span */
  for (int64_t i = 0; i < numel; i++) {
    values[i] = load_value(t->dtype, base, at);
    for (int d = t->ndim - 1; d >= 0; d--) { /* odometer step */
      at += t->strides[d];
      if (++index[d] < t->sizes[d]) break;
      at -= t->strides[d] * index[d];
      index[d] = 0;
    }
  }
  tg__host_free(copy);
  return values;
}

char *tg_to_string(const tg_tensor *t) {
  if (!tg__check_arg("tg_to_string", "t", t)) return NULL;
  /* A device without data (meta) prints its geometry only, as PyTorch does. */
  const bool has_data = tg__device_type_has_data(t->storage->device.type);
  int64_t numel = has_data ? tg__numel(t->ndim, t->sizes) : 0;
  double *values = has_data ? read_values(t, numel) : NULL;
  if (has_data && !values) return NULL;

  strbuf sb = {0};
  printer p = {t, values, numel > PRINT_THRESHOLD, {t->dtype, true, false, 1}, &sb};
  double lo = 0, hi = 0;
  bool integral = true, any = false;
  if (numel > 0) scan(&p, 0, 0, &lo, &hi, &integral, &any);
  p.fmt.integral = integral;
  p.fmt.scientific = t->dtype != TG_I64 && any && !integral &&
                     (hi >= 1e8 || (lo > 0 && lo < 1e-4) || (lo > 0 && hi / lo > 1000.0));
  /* Width: the longest printed value, so columns line up. */
  int width = 1;
  if (numel > 0) {
    for (int64_t i = 0; i < numel; i++) {
      char buf[64];
      int w = format_value(&p.fmt, values[i], buf, sizeof buf);
      if (w > width) width = w;
    }
  }
  p.fmt.width = width;

  sb_printf(&sb, "tensor(");
  if (!has_data)
    sb_printf(&sb, "...");
  else if (numel == 0)
    sb_printf(&sb, "[]");
  else
    emit(&p, 0, 0, (int)strlen("tensor("));
  sb_printf(&sb, ", size=%s", tg__sizes_str(t));
  if (t->dtype != TG_F32) sb_printf(&sb, ", dtype=%s", tg_dtype_name(t->dtype));
  if (t->storage->device.type == TG_META)
    sb_printf(&sb, ", device=meta"); /* one meta device: no index */
  else if (t->storage->device.type != TG_CPU)
    sb_printf(&sb, ", device=%s:%d", tg_device_type_name(t->storage->device.type),
              t->storage->device.index);
  if (t->grad_fn)
    sb_printf(&sb, ", grad_fn=<%s>", tg__node_header(t->grad_fn)->name);
  else if (t->requires_grad)
    sb_printf(&sb, ", requires_grad=true");
  sb_printf(&sb, ")");
  tg__host_free(values);
  if (sb.failed) {
    tg__host_free(sb.data);
    tg_set_error(TG_ERR_MEMORY, "tg_to_string: out of memory");
    return NULL;
  }
  return sb.data;
}

tg_status tg_fprint(FILE *f, const tg_tensor *t) {
  if (!f) return tg_set_error(TG_ERR_ARGUMENT, "tg_fprint: f is NULL");
  char *s = tg_to_string(t);
  if (!s) return tg_last_error();
  fprintf(f, "%s\n", s);
  tg__host_free(s);
  return TG_OK;
}

tg_status tg_print(const tg_tensor *t) { return tg_fprint(stdout, t); }
