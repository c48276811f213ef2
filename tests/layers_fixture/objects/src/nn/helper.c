/* The nn-layer function ../tensor/calls_up.c calls against the layer direction. */
void tg_fixture_nn_helper(void);
void tg_fixture_nn_helper(void) {}
