// The hint is inline in the header; this file makes the target a C library.
#include "cogd_prefetch.h"
