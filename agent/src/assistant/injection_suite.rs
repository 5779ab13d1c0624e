//! The injection suite over every carrier (see the module's tests).
