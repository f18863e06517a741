/* bench_accum - float against double accumulation of the second moment
   C = sum x x^T of unit rows (DESIGN 7.1; second_moment.c accumulates in
   double through dsyrk, 64 rows per call).  Not a timing: an accuracy
   measurement, to decide whether C may be kept in float (ssyrk, d^2 floats).

   For n unit rows of dimension d (generated --block rows at a time, never all
   at once), in the library's block shape (64 rows per syrk call into C):
     Cd   double rows, dsyrk, double C (the library today);
     Cf   float rows, ssyrk, float C.
   Reported: max_ij |Cf - Cd|, ||Cf - Cd||_F, against the Gaussian mechanism's
   noise sd 1/sqrt(rho) and against its l2 sensitivity sqrt 2 (the privacy
   argument bounds ||C(D) - C(D')||_F <= sqrt 2 for neighbours D, D').  And
   the neighbour experiment: D' = D with its FIRST row replaced (every later
   rounding may then differ), excess = ||(Cf(D) - Cf(D')) - (x'x'^T - x x^T)||_F,
   i.e. how far the float accumulation moves the sensitivity past sqrt 2
   (and the same for double).
   Rows: --kind uniform (uniform on the sphere), concentrated (a random
   10-dim subspace of dense directions plus 10% noise, normalised) or spike
   (e_0 plus noise of norm 0.5, normalised: C_00 ~ 0.8 n, the worst case for
   float: the largest entries carry the largest rounding; gradient rows with
   a dominant coordinate, e.g. a bias, look like this). */
#include "bench_common.h"

#include <math.h>

static const char s_synopsis[] = "usage: bench-accum [--n 60000] [--d 2000] [--rho 4] [--kind uniform|concentrated|spike]\n";

/* rows [i0, i0 + r) of the stream: seeded by (seed, i), so row i is the same
   in every pass; row 0 of the neighbour uses another seed. */
static void s_rows(uint64_t seed, const float *B, size_t kb, size_t d, size_t i0, size_t r, int conc,
                   int neighbour, float *X)
{
    for (size_t i = 0; i < r; i++) {
        b_rng g;
        b_seed(&g, seed * 1000003 + i0 + i + (neighbour && i0 + i == 0 ? 77777777 : 0));
        float *x = X + i * d;
        for (size_t c = 0; c < d; c++)
            x[c] = (float)(conc == 2 ? 0.5 * b_gauss(&g) / sqrt((double)d) + (c == 0)
                           : conc ? 0.1 * b_gauss(&g) / sqrt((double)d) : b_gauss(&g));
        if (conc == 1)
            for (size_t a = 0; a < kb; a++) {
                float coef = (float)(b_gauss(&g) / sqrt((double)kb));
                for (size_t c = 0; c < d; c++)
                    x[c] += coef * B[a * d + c];
            }
        double s = 0;
        for (size_t c = 0; c < d; c++)
            s += (double)x[c] * x[c];
        float inv = (float)(1.0 / sqrt(s));
        for (size_t c = 0; c < d; c++)
            x[c] *= inv;
    }
}

/* C (upper triangle) = sum over the stream, float and double. */
static void s_accumulate(uint64_t seed, const float *B, size_t kb, size_t n, size_t d, int conc, int neighbour,
                         float *Cf, double *Cd)
{
    enum { BLK = 64 };
    float *X = b_alloc(BLK * d * sizeof *X);
    double *Xd = b_alloc(BLK * d * sizeof *Xd);
    memset(Cf, 0, d * d * sizeof *Cf);
    memset(Cd, 0, d * d * sizeof *Cd);
    for (size_t i0 = 0; i0 < n; i0 += BLK) {
        size_t r = n - i0 < BLK ? n - i0 : BLK;
        s_rows(seed, B, kb, d, i0, r, conc, neighbour, X);
        for (size_t i = 0; i < r * d; i++)
            Xd[i] = X[i];
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)r, 1.0f, X, (int)d, 1.0f, Cf, (int)d);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)r, 1.0, Xd, (int)d, 1.0, Cd, (int)d);
    }
    free(X);
    free(Xd);
}

int main(int argc, char **argv)
{
    cli_set_program("bench-accum");
    size_t n = 60000, d = 2000, kb = 10;
    double rho = 4;
    uint64_t seed = 1;
    const char *kind = "uniform";
    int help = 0;
    cli_opt flags[] = {
        B_SIZE("--n", &n, "N", "60000", "rows"),
        B_SIZE("--d", &d, "D", "2000", "dimension"),
        {"--rho", CLI_OPT_DOUBLE, &rho, "R", "4", "the Gaussian mechanism's rho (noise sd 1/sqrt(rho))", 0},
        {"--kind", CLI_OPT_STRING, &kind, "K", "uniform", "uniform, concentrated or spike rows", 0},
        {"--seed", CLI_OPT_U64, &seed, "S", "1", "seed of the rows", 0},
        B_HELP(&help),
    };
    int prc = b_parse(argc, argv, flags, sizeof flags / sizeof flags[0], &help, s_synopsis);
    if (prc >= 0)
        return prc;
    int conc = strcmp(kind, "concentrated") == 0 ? 1 : strcmp(kind, "spike") == 0 ? 2 : 0;
    if (!conc && strcmp(kind, "uniform") != 0)
        CLI_USAGE("--kind uniform, concentrated or spike");
    dps_blas_set_threads(1);
    b_header("bench-accum: float (ssyrk) vs double (dsyrk) accumulation of C = sum x x^T, 64 rows per call", 1);
    float *B = b_alloc(kb * d * sizeof *B);
    b_rng g;
    b_seed(&g, seed);
    for (size_t i = 0; i < kb * d; i++)
        B[i] = (float)(b_gauss(&g) / sqrt((double)d));
    float *Cf = b_alloc(d * d * sizeof *Cf), *Cf2 = b_alloc(d * d * sizeof *Cf2);
    double *Cd = b_alloc(d * d * sizeof *Cd), *Cd2 = b_alloc(d * d * sizeof *Cd2);
    double t0 = b_now();
    s_accumulate(seed, B, kb, n, d, conc, 0, Cf, Cd);
    double maxe = 0, fro = 0, maxc = 0;
    for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++) {
            double e = fabs((double)Cf[i * d + j] - Cd[i * d + j]);
            maxe = fmax(maxe, e);
            fro += (i == j ? 1 : 2) * e * e;
            maxc = fmax(maxc, fabs(Cd[i * d + j]));
        }
    fro = sqrt(fro);
    /* the neighbour: row 0 replaced */
    s_accumulate(seed, B, kb, n, d, conc, 1, Cf2, Cd2);
    float *x = b_alloc(d * sizeof *x), *y = b_alloc(d * sizeof *y);
    s_rows(seed, B, kb, d, 0, 1, conc, 0, x);
    s_rows(seed, B, kb, d, 0, 1, conc, 1, y);
    double exf = 0, exd = 0;
    for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++) {
            double D = (double)y[i] * y[j] - (double)x[i] * x[j];
            double ef = ((double)Cf2[i * d + j] - Cf[i * d + j]) - D, ed = (Cd2[i * d + j] - Cd[i * d + j]) - D;
            exf += (i == j ? 1 : 2) * ef * ef;
            exd += (i == j ? 1 : 2) * ed * ed;
        }
    double sd = 1.0 / sqrt(rho);
    printf("rows %zu  d %zu  kind %s  max |C_ij| %.1f  (%.1f s)\n", n, d, kind, maxc, b_now() - t0);
    printf("float - double:  max entry %.3e (%.2e of the noise sd %.3f)  Frobenius %.3e (%.2e of the sensitivity "
           "sqrt 2)\n",
           maxe, maxe / sd, sd, fro, fro / sqrt(2.0));
    printf("neighbour (row 0 replaced): sensitivity excess ||dC - (yy^T - xx^T)||_F  float %.3e  double %.3e\n",
           sqrt(exf), sqrt(exd));
    b_footer();
    free(B); free(Cf); free(Cf2); free(Cd); free(Cd2); free(x); free(y);
    return 0;
}
