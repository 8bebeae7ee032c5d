/*
 * replay.c (tests/fuzz/) — run a fuzz target's entry point over corpus files
 * given on the command line, for the ctest build (no libFuzzer needed). Exits
 * non-zero if a file cannot be read; a target's failure aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "replay: cannot open %s\n", argv[i]);
            return 1;
        }
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, len);
        n++;
    }
    printf("%d passed, 0 failed\n", n);
    return n > 0 ? 0 : 1;
}
