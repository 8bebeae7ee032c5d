/*
 * fuzz_config.c (tests/fuzz/) — a libFuzzer target for the configuration text
 * parser.
 *
 * Any input must parse or fail cleanly (no crash, no sanitizer report), and a
 * text that parses must survive the round trip: format -> parse -> format gives
 * the same text, and the parsed copy validates as the original did (same
 * code, same field: a formatted configuration writes every knob, and a knob
 * at its default is never "set" to no effect). Built as a fuzzer with clang
 * (-DBW_FUZZ=ON); without it, the same entry point is driven over the
 * checked-in corpus by replay.c under ctest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/breakwater.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    bw_config *a = bw_config_new(), *b = bw_config_new();
    bw_error err;
    if (a && b && bw_config_parse(a, text, &err) == BW_OK) {
        char first[1024], second[1024];
        bw_config_format(a, first, sizeof first);
        if (bw_config_parse(b, first, &err) != BW_OK)
            abort(); /* formatted text must parse */
        bw_config_format(b, second, sizeof second);
        if (strcmp(first, second) != 0)
            abort(); /* and mean the same */
        bw_error ea, eb;
        int va = bw_config_validate(a, &ea), vb = bw_config_validate(b, &eb);
        if (va != vb || (va != BW_OK && (strcmp(ea.field, eb.field) != 0 || !memchr(ea.message, 0, sizeof ea.message))))
            abort(); /* and validate alike */
    } else if (a && (err.code != BW_EPARSE && err.code != BW_ERANGE)) {
        abort(); /* text is malformed or out of range, nothing else */
    }
    bw_config_free(a);
    bw_config_free(b);
    free(text);
    return 0;
}
