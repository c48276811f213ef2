/* Live tape nodes per registered user op (op_refs.h). The table changes only when ops are
 * registered or unregistered; lookups happen when a node of a tracked op is created. */
#include "op_refs.h"

#include <limits.h>
#include <pthread.h>

#include "tensor/host_memory.h"

typedef struct op_ref {
  const tg_op_desc *op;
  atomic_long live; /* nodes of op alive now */
} op_ref;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static op_ref **refs; /* each entry its own allocation: counters never move */
static int count, capacity;

static int index_of(const tg_op_desc *op) {
  for (int i = 0; i < count; i++)
    if (refs[i]->op == op) return i;
  return -1;
}

tg_status tg__op_refs_track(const tg_op_desc *op) {
  op_ref *ref = tg__host_malloc(sizeof *ref);
  if (!ref) return tg_set_error(TG_ERR_MEMORY, "tg_op_register: out of memory");
  ref->op = op;
  atomic_init(&ref->live, 0);
  pthread_mutex_lock(&lock);
  if (count == capacity) {
    int cap = capacity ? capacity * 2 : 8;
    op_ref **grown =
        capacity > INT_MAX / 2 ? NULL : tg__host_realloc(refs, sizeof *grown * (size_t)cap);
    if (!grown) {
      pthread_mutex_unlock(&lock);
      tg__host_free(ref);
      return tg_set_error(TG_ERR_MEMORY, "tg_op_register: out of memory");
    }
    refs = grown;
    capacity = cap;
  }
  refs[count++] = ref;
  pthread_mutex_unlock(&lock);
  return TG_OK;
}

atomic_long *tg__op_refs_acquire(const tg_op_desc *op) {
  pthread_mutex_lock(&lock);
  int i = index_of(op);
  atomic_long *counter = i >= 0 ? &refs[i]->live : NULL;
  if (counter) atomic_fetch_add(counter, 1);
  pthread_mutex_unlock(&lock);
  return counter;
}

tg_status tg__op_refs_untrack_unused(const char *who, int n, const tg_op_desc *const *ops) {
  pthread_mutex_lock(&lock);
  for (int k = 0; k < n; k++) {
    int i = index_of(ops[k]);
    long live = i >= 0 ? atomic_load(&refs[i]->live) : 0;
    if (live > 0) {
      pthread_mutex_unlock(&lock);
      return tg_set_error(TG_ERR_STATE,
                          "%s: %ld graph node(s) made by op '%s' are still alive; release the "
                          "tensors whose history reaches them first",
                          who, live, ops[k]->name);
    }
  }
  for (int k = 0; k < n; k++) {
    int i = index_of(ops[k]);
    if (i < 0) continue;
    tg__host_free(refs[i]);
    refs[i] = refs[--count];
  }
  if (count == 0) { /* the last user op is gone: nothing of the table stays allocated */
    tg__host_free(refs);
    refs = NULL;
    capacity = 0;
  }
  pthread_mutex_unlock(&lock);
  return TG_OK;
}
