/* A shared object that is not a tg device module: it lacks the entry point. */
int tg_test_not_a_module(void);
int tg_test_not_a_module(void) { return 42; }
