/*
 * test_url_secrets.c — the scrub of a message (store/url.c, bw__url_scrub:
 * what bw_store_open and every later call of a store opened by URL apply to
 * their errors) on messages written here, for what no library message shows
 * on demand: a secret quoted percent-decoded, a piece of a secret that is a
 * piece of a word of the message, messages of any length.
 */
#include <stdlib.h>

#include "harness.h"
#include "store/backend.h"

static void scrubbed(const char *url, const char *msg, const char *want)
{
    char s[216];
    snprintf(s, sizeof s, "%s", msg);
    bw__url_scrub(url, s, sizeof s);
    if (strcmp(s, want) != 0)
        H_FAIL("%s: '%s' scrubbed as '%s', want '%s'", url, msg, s, want);
}

/* A library that decodes the URL (libpq) quotes the secret decoded: "%40" as '@'. */
static void test_decoded(void)
{
    scrubbed("postgresql://u:Zq7x%40Pw9k@h/db", "password Zq7x@Pw9k refused", "password *** refused");
    /* libpq: no credentials before the '/', so host "u" and port "Zq7x%40Pw9k", decoded */
    scrubbed("postgresql://u:Zq7x%40Pw9k/x@h/db", "invalid integer value \"Zq7x@Pw9k\" for connection option \"port\"",
             "invalid integer value \"***@***\" for connection option \"port\"");
    scrubbed("postgresql://u:Zq7x%2fPw9k%41bc@h", "Zq7x/Pw9kAbc", "***");
    scrubbed("postgresql://u:Zq7x%2FPw9k@h", "port \"Pw9k\"", "port \"***\""); /* a piece, decoded */
    scrubbed("postgresql://u:Zq7x%00Pw9k@h", "\"Zq7x\" and \"Pw9k\"", "\"***\" and \"***\"");
    scrubbed("postgresql://u:Zq7x%zzPw9k@h", "token: \"Zq7x%zzPw9k\"", "token: \"***\""); /* not an escape */
}

/*
 * A piece of a secret (between a URL's delimiters) is masked where it is a word of its own, not inside a longer
 * word: the password "pass word" leaves "password" alone; all of a secret is masked wherever it is.
 */
static void test_pieces_as_words(void)
{
    const char *url = "postgresql:host=h password='pass word'";
    scrubbed(url, "password authentication failed for user \"bwpass\"",
             "password authentication failed for user \"bwpass\"");
    scrubbed(url, "missing \"=\" after \"word\" in connection info string",
             "missing \"=\" after \"***\" in connection info string");
    scrubbed(url, "a word to pass", "a *** to ***"); /* a word of the message that is a piece of the secret */
    scrubbed(url, "'pass word'", "***");
    scrubbed("redis://:pass@h", "password", "***word"); /* all of the secret: inside a word too */
    scrubbed("redis://u:Zq7x/Pw9k@h", "host Zq7xPw9k, port Zq7x_, Pw9k9", "host Zq7xPw9k, port ***_, Pw9k9");
    scrubbed("redis://u:-Zq7x-/Pw9k@h", "a-Zq7x-b", "a***b"); /* an end that is not a letter or digit: no rule */
}

/*
 * Any length (the scrub cut every message to 511 bytes), in place; a string not terminated in its array cut; a
 * message cut short in the middle of a secret (bw__fail cuts a message to its array) ends in "***".
 */
static void test_lengths(void)
{
    enum { N = 4096 };
    char *s = malloc(N);
    CHECK(s != NULL);
    if (!s)
        return;
    memset(s, 'x', N - 1);
    s[N - 1] = 0;
    memcpy(s + 3000, " Zq7xPw9k ", 10);
    memcpy(s + 5, " Zq7xPw9k ", 10);
    bw__url_scrub("redis://:Zq7xPw9k@h", s, N);
    CHECK_INT(strlen(s), N - 1 - 2 * 5);
    CHECK(strstr(s, "Zq7x") == NULL);
    CHECK(strncmp(s, "xxxxx *** x", 11) == 0);
    CHECK(strncmp(s + 3000 - 5, " *** xx", 7) == 0);
    memcpy(s, "Zq7xPw9k", 8); /* no NUL in the array: cut to its last byte but one, then scrubbed */
    bw__url_scrub("redis://:Zq7xPw9k@h", s, 8);
    CHECK_STR(s, "***"); /* the first 7 bytes of the secret, at the end of a message cut short */
    memcpy(s, "Zq7xPw9k", 8);
    bw__url_scrub("redis://:Zq7xPw9k@h", s, 9);
    CHECK_STR(s, "***");
    scrubbed("redis://:Zq7xPw9k@h", "refused: Zq7xP", "refused: ***");
    scrubbed("redis://:Zq7xPw9k@h", "refused: Zq", "refused: Zq");            /* 2 bytes: too short to tell */
    scrubbed("postgresql:host=h password='pass word'", "a bypas", "a bypas"); /* a piece's start inside a word */
    free(s);
}

int main(void)
{
    RUN(test_decoded);
    RUN(test_pieces_as_words);
    RUN(test_lengths);
    return TEST_SUMMARY();
}
