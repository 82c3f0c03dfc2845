// Stub (see README.md): the libc subset bridge.m uses.
#pragma once
#include <stddef.h>
void *malloc(size_t size);
void free(void *p);
