package loadtest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCurve(t *testing.T) {
	t.Parallel()
	tsv := "# limiter\toffered\tsent\treserved\tp99\n" +
		"on\t1000\t1000\t1000\t5.06ms\n" +
		"on\t20000\t19876\t9800\t40ms\n" +
		"off\t1000\t1000\t1000\t8.895ms\n" +
		"off\t20000\t9751\t9751\t485.406ms\n"
	points, err := ReadCurve(strings.NewReader(tsv))
	require.NoError(t, err)
	require.Len(t, points, 4)
	require.Equal(t, CurvePoint{Limiter: "off", Offered: 20000, Sent: 9751, Reserved: 9751, P99: 485406 * time.Microsecond}, points[3])

	var out bytes.Buffer
	require.NoError(t, WriteCurveSVG(&out, points))
	svg := out.String()
	requireWellFormed(t, svg)
	require.True(t, strings.HasPrefix(svg, `<svg xmlns="http://www.w3.org/2000/svg"`))
	require.Equal(t, 4, strings.Count(svg, `<path class="line`), "two lines in each of two charts")
	require.Contains(t, svg, "limiter on")
	require.Contains(t, svg, "limiter off")
	require.Contains(t, svg, "offered reservations/s")

	for _, bad := range []string{"on\t1000\t1000\n", "on\tx\t1\t1\t1ms\n", "on\t1\t1\t1\tsoon\n"} {
		_, err := ReadCurve(strings.NewReader(bad))
		require.Error(t, err, "%q", bad)
	}
}
