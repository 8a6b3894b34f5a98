package waitpage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestWaitPageLotteryVariants: a lottery with variants' page, in headless
// Chromium against a serve process: the form offers any and each variant,
// the customer registers for one, is drawn, and the page reserves the
// variant won without asking.
func TestWaitPageLotteryVariants(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t)
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL)
	c := testserver.NewClient()
	now := time.Now().UTC()
	drawAt := now.Add(10 * time.Minute).Truncate(time.Second)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_lottery_v","confirmation":"customer","admission":"lottery",
		"variants":[{"sku":"S","title":"Small","stock":1},{"sku":"L","title":"Large","stock":1}],
		"registrationOpensAt":%q,"registrationClosesAt":%q,"drawAt":%q,"purchaseWindowSeconds":300}`,
		now.Add(-time.Second).Format(time.RFC3339), drawAt.Format(time.RFC3339), drawAt.Format(time.RFC3339)))
	jwt := testserver.Token(t, "browser-lottery-variants")

	b.do("open the sale's page", 30*time.Second, chromedp.Navigate(srv.URL+"/sales/"+saleID+"/wait#token="+jwt))
	b.adoptLinkToken()
	b.waitState(30*time.Second, "lottery")
	if eval[bool](b, `document.getElementById("lottery-variant-wrap").hidden`) {
		b.fail("the page does not ask which variant")
	}
	options := eval[string](b, `Array.from(document.getElementById("lottery-variant").options).map(o => o.value + "=" + o.textContent).join(",")`)
	require.Equal(t, "any=Any of them,S=Small,L=Large", options)
	if !eval[bool](b, `(document.getElementById("lottery-variant").value = "L") === "L"`) {
		b.fail("cannot choose Large")
	}
	title := func() string { return eval[string](b, `document.getElementById("lottery-title").textContent`) }
	b.do("click #lottery-register", 10*time.Second, chromedp.Click(chromedp.ID("lottery-register")))
	for deadline := time.Now().Add(20 * time.Second); title() != "You are registered"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.fail("not registered within 20 s: %q", title())
		}
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var named string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT variant FROM lottery_registrations WHERE sale_id = $1`, saleID).Scan(&named))
	require.Equal(t, "L", named)
	for _, stmt := range []string{
		`UPDATE lotteries SET registration_closes_at = now(), draw_at = now() WHERE sale_id = $1`,
		`UPDATE sales SET opens_at = now() WHERE sale_id = $1`,
	} {
		_, err = conn.Exec(context.Background(), stmt, saleID)
		require.NoError(t, err)
	}
	b.waitState(90*time.Second, "reserved")
	if got := eval[string](b, `document.getElementById("reserved-variant-title").textContent`); got != "Large" {
		b.fail("the page reserved %q, not the variant won", got)
	}
	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy:\n%s", strings.Join(bad, "\n"))
	}
}
