package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// TestSaleCreateVariants: `sale create --variants` as an operator writes it
// (SKU:stock[:title],... or @FILE), its bad spellings refused before any
// connection with a message that names the variant, and `sale show` and
// `sale report` (text and CSV) giving each variant's sold, held and
// available, and `check` a line for each variant, mismatched when a unit
// moved between two variants' rows (the sale's sum still adds up).
func TestSaleCreateVariants(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)

	out, _, err := runCLI(t, dbURL, "sale", "create", "--sku", "drop-1", "--confirmation", "customer",
		"--variants", "S:3, M:4:Medium: wide fit,L:2")
	require.NoError(t, err)
	var sale struct {
		SaleID       string
		InitialStock int
		Buckets      int
		Variants     []struct {
			SKU, Title                                  string
			InitialStock, Available, Pending, Confirmed int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sale))
	require.Equal(t, 9, sale.InitialStock)
	require.Len(t, sale.Variants, 3)
	require.Equal(t, "M", sale.Variants[1].SKU)
	require.Equal(t, "Medium: wide fit", sale.Variants[1].Title, "a title runs to the next comma")
	require.Equal(t, "L", sale.Variants[2].Title, "no title: the SKU")

	file := filepath.Join(t.TempDir(), "variants.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"sku":"EU-42","title":"42, black","stock":5,"buckets":2},{"sku":"EU-43","stock":1}]`), 0o600))
	out, _, err = runCLI(t, dbURL, "sale", "create", "--sku", "drop-2", "--variants", "@"+file)
	require.NoError(t, err)
	require.Contains(t, out, `"title": "42, black"`)
	require.Contains(t, out, `"buckets": 2`)

	t.Run("BadInput", func(t *testing.T) {
		typo := filepath.Join(t.TempDir(), "typo.json")
		require.NoError(t, os.WriteFile(typo, []byte(`[{"sku":"S","stok":5}]`), 0o600))
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--variants", "S"}, `variant 1 is "S": write SKU:stock[:title]`},
			{[]string{"--variants", "S:3,"}, `variant 2 is "": write SKU:stock[:title]`},
			{[]string{"--variants", "S:three"}, `variant S: stock "three" is not a whole number`},
			{[]string{"--variants", "S:3:"}, "variant S: the title after the second ':' is empty"},
			{[]string{"--variants", "S:3,S:4"}, "variants[1].sku S appears twice"},
			{[]string{"--variants", "S:0"}, "variants[0].stock must be between 1 and 100000000"},
			{[]string{"--variants", "S/1:3"}, "variants[0].sku must be"},
			{[]string{"--variants", "S:3", "--stock", "3"}, "--stock goes with a sale without variants"},
			{[]string{"--variants", "S:3", "--buckets", "2"}, "--buckets goes with a sale without variants"},
			{[]string{"--variants", strings.Repeat("S:1,", 100) + "S:1"}, "101 variants, at most 100"},
			{[]string{"--variants", "@" + typo}, `unknown field "stok"`},
			{[]string{"--variants", "@" + filepath.Join(t.TempDir(), "missing.json")}, "no such file"},
		} {
			// No database: the spelling is refused before a connection.
			_, _, err := runCLI(t, "postgres://nowhere.invalid/x", append([]string{"sale", "create", "--sku", "x"}, c.args...)...)
			require.ErrorContains(t, err, c.want, "%v", c.args)
		}
	})

	// Two of M sold, one of S held; the report gives each variant's own.
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	ctx := context.Background()
	for _, b := range []struct{ customer, variant string }{{"c1", "M"}, {"c2", "M"}, {"c3", "S"}} {
		res, err := s.Reserve(ctx, flashline.ReserveRequest{SaleID: sale.SaleID, CustomerID: b.customer, IdempotencyKey: "k",
			Quantity: 1, Variant: b.variant, Fingerprint: []byte(b.variant)})
		require.NoError(t, err)
		if b.variant == "M" {
			_, err = s.Confirm(ctx, res.Reservation.ID, flashline.Actor{CustomerID: b.customer})
			require.NoError(t, err)
		}
	}
	out, _, err = runCLI(t, dbURL, "sale", "show", sale.SaleID)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &sale))
	require.Equal(t, 2, sale.Variants[1].Confirmed)
	require.Equal(t, 1, sale.Variants[0].Pending)

	out, _, err = runCLI(t, dbURL, "sale", "report", sale.SaleID)
	require.NoError(t, err)
	row := func(sku string) []string {
		m := regexp.MustCompile(`(?m)^` + sku + `  .*$`).FindString(out)
		require.NotEmpty(t, m, "no row for %s in\n%s", sku, out)
		f := regexp.MustCompile(`\s{2,}`).Split(m, -1)
		return f
	}
	require.Contains(t, out, "VARIANT")
	require.Equal(t, []string{"S", "S", "3", "0", "1", "2"}, row("S"))
	require.Equal(t, []string{"M", "Medium: wide fit", "4", "2", "0", "2"}, row("M"))
	require.Equal(t, []string{"L", "L", "2", "0", "0", "2"}, row("L"))

	out, _, err = runCLI(t, dbURL, "sale", "report", sale.SaleID, "--csv")
	require.NoError(t, err)
	r := csv.NewReader(strings.NewReader(out))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"variant", "title", "initial", "sold", "held", "available"},
		{"S", "S", "3", "0", "1", "2"},
		{"M", "Medium: wide fit", "4", "2", "0", "2"},
		{"L", "L", "2", "0", "0", "2"},
	}, rows[len(rows)-4:])

	out, _, err = runCLI(t, dbURL, "check")
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `(?m)^\s*variant M\s+4\s+2\s+0\s+2\s+-\s+-\s+-\s+2\s+ok`, out)
	require.Contains(t, out, "2 sales, 0 mismatched")
	_, err = pool.Exec(ctx, `UPDATE stock SET quantity = quantity + 1 WHERE sale_id = $1 AND variant = 'S'`, sale.SaleID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE stock SET quantity = quantity - 1 WHERE sale_id = $1 AND variant = 'L'`, sale.SaleID)
	require.NoError(t, err)
	out, _, err = runCLI(t, dbURL, "check")
	require.ErrorIs(t, err, errMismatch)
	require.Regexp(t, `(?m)^\s*`+sale.SaleID+`\s.*\sMISMATCH$`, out)
	require.Regexp(t, `(?m)^\s*variant S\s.*\sMISMATCH$`, out)
	require.Regexp(t, `(?m)^\s*variant L\s.*\sMISMATCH$`, out)
	require.Regexp(t, `(?m)^\s*variant M\s.*\sok$`, out)
	require.Contains(t, out, "2 sales, 1 mismatched")
}
