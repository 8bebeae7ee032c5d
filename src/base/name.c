/*
 * name.c — breaker names, keys and the store keys made of them (name.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "base/name.h"

#include <string.h>

#include "base/error.h"

int bw__check_name(const char *name, const char *field, bw_error *err)
{
    if (!name)
        return bw__fail(err, BW_EINVAL, field, "%s must not be NULL", field);
    size_t n = 0;
    for (; name[n]; n++) {
        unsigned char c = (unsigned char)name[n];
        if (c <= 0x20 || c >= 0x7f)
            return bw__fail(err, BW_EINVAL, field, "%s must be printable ASCII without spaces; byte %zu is 0x%02x",
                            field, n, c);
        if (n >= BW__NAME_MAX)
            return bw__fail(err, BW_EINVAL, field, "%s must be 1 to %d bytes long", field, BW__NAME_MAX);
    }
    if (n == 0)
        return bw__fail(err, BW_EINVAL, field, "%s must be 1 to %d bytes long, got an empty %s", field, BW__NAME_MAX,
                        field);
    return BW_OK;
}

int bw__check_store_key(const char *key, const char *field, bw_error *err)
{
    if (!key)
        return bw__fail(err, BW_EINVAL, field, "%s must not be NULL", field);
    const char *sp = memchr(key, ' ', strnlen(key, BW__STORE_KEY_MAX + 1));
    if (!sp)
        return bw__check_name(key, field, err);
    size_t nlen = (size_t)(sp - key);
    char name[BW__NAME_MAX + 1];
    if (nlen == 0 || nlen > BW__NAME_MAX)
        return bw__fail(err, BW_EINVAL, field, "%s must be NAME or NAME KEY, each part 1 to %d bytes", field,
                        BW__NAME_MAX);
    memcpy(name, key, nlen);
    name[nlen] = '\0';
    int rc = bw__check_name(name, field, err);
    return rc != BW_OK ? rc : bw__check_name(sp + 1, field, err);
}

size_t bw__store_key(char *buf, const char *name, const char *key)
{
    size_t n = strlen(name);
    memcpy(buf, name, n);
    if (key) {
        size_t k = strlen(key);
        buf[n++] = ' ';
        memcpy(buf + n, key, k);
        n += k;
    }
    buf[n] = '\0';
    return n;
}
