/* A shared library that is not a tg extension. */
int ext_plain_answer(void);
int ext_plain_answer(void) { return 42; }
