/* Anomaly mode's checks (tg_set_detect_anomaly), called by tg_apply and the engine. */
#ifndef TG_ANOMALY_H
#define TG_ANOMALY_H

#include "tensor/tensor_impl.h"

/* Whether this op call is to be checked: anomaly mode is on and no checked call encloses it.
 * When true, the calls inside it (a composite forward's ops, a backward formula's ops) go
 * unchecked until tg__anomaly_end_op(true): only what the caller asked for is judged. */
bool tg__anomaly_begin_op(void);
void tg__anomaly_end_op(bool began);

/* TG_ERR_STATE "<fn>: detect anomaly: forward produced nan in output <j> at [i, ...]" when
 * out (output j of the call fn) holds a NaN or infinity; TG_OK otherwise. */
tg_status tg__anomaly_check_output(const char *fn, int j, const tg_tensor *out);
/* The same for the gradient of input i that the backward of op returned, in the pass fn. */
tg_status tg__anomaly_check_grad(const char *fn, const char *op, int i, const tg_tensor *grad);

#endif
