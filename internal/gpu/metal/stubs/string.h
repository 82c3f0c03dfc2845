// Stub (see README.md): the libc subset bridge.m uses.
#pragma once
#include <stddef.h>
void *memcpy(void *dst, const void *src, size_t n);
size_t strlen(const char *s);
