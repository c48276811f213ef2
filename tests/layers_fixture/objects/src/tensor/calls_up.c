/* A planted upward call: the tensor layer calling a function the nn layer defines
 * (../nn/helper.c). scripts/check-layers.sh --objects must name it. */
void tg_fixture_nn_helper(void);

void tg_fixture_tensor_user(void);
void tg_fixture_tensor_user(void) { tg_fixture_nn_helper(); }
