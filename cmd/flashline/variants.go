package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/handlers"
)

// `flashline sale create --variants`: a sale's variants (issue 49) as an
// operator writes them on a command line, or as the API's create body has
// them in a file.

const variantsHelp = "the sale's variants (instead of --stock and --buckets): SKU:stock[:title],... " +
	"(e.g. S:100,M:100:Medium,L:100:Large; a title runs to the next comma), or @FILE: " +
	`a JSON array as POST /admin/sales has it, [{"sku":"S","title":"Small","stock":100,"buckets":2}, ...]`

// maxVariantsFile bounds what @FILE reads: 100 variants of a 120-character
// title fit many times over.
const maxVariantsFile = 1 << 20

// parseVariants reads --variants: "SKU:stock[:title],..." or "@FILE". Each
// variant's own checks (SKU form, stock range, duplicates, 1-100 of them)
// are the API's, made after: this says only what the spelling got wrong.
func parseVariants(spec string) ([]handlers.VariantRequest, error) {
	if name, ok := strings.CutPrefix(spec, "@"); ok {
		return readVariantsFile(name)
	}
	entries := strings.Split(spec, ",")
	if len(entries) > flashline.MaxVariants {
		return nil, fmt.Errorf("--variants: %d variants, at most %d", len(entries), flashline.MaxVariants)
	}
	out := make([]handlers.VariantRequest, 0, len(entries))
	for i, entry := range entries {
		parts := strings.SplitN(strings.TrimSpace(entry), ":", 3)
		if len(parts) < 2 || parts[0] == "" {
			return nil, fmt.Errorf("--variants: variant %d is %q: write SKU:stock[:title], e.g. S:100:Small", i+1, entry)
		}
		stock, err := strconv.Atoi(parts[1])
		if err != nil {
			return nil, fmt.Errorf("--variants: variant %s: stock %q is not a whole number", parts[0], parts[1])
		}
		v := handlers.VariantRequest{SKU: parts[0], Stock: stock}
		if len(parts) == 3 {
			if v.Title = parts[2]; v.Title == "" {
				return nil, fmt.Errorf("--variants: variant %s: the title after the second ':' is empty (leave out ':' for the SKU as title)", parts[0])
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// readVariantsFile reads a JSON array of variants, as the create body's
// "variants" has them; a field it does not know is refused (a typo for
// "stock" would otherwise leave it 0).
func readVariantsFile(name string) ([]handlers.VariantRequest, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--variants: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxVariantsFile+1))
	if err != nil {
		return nil, fmt.Errorf("--variants: %w", err)
	}
	if len(b) > maxVariantsFile {
		return nil, fmt.Errorf("--variants: %s is over %d bytes", name, maxVariantsFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out []handlers.VariantRequest
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("--variants: %s: want a JSON array of {\"sku\", \"title\", \"stock\", \"buckets\"}: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("--variants: %s: more after the array", name)
	}
	if len(out) == 0 {
		return nil, errors.New("--variants: " + name + " lists no variant")
	}
	return out, nil
}

// variantsOrStock fills the request's stock: --stock (and --buckets) for a
// sale without variants, or --variants, with which neither is given (each
// variant has its stock and buckets).
func variantsOrStock(fs *flag.FlagSet, req *handlers.CreateSaleRequest, stock int, spec string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["variants"] {
		req.InitialStock = &stock
		return nil
	}
	switch {
	case set["stock"]:
		return errors.New("--stock goes with a sale without variants: with --variants each variant has its stock")
	case set["buckets"]:
		return errors.New("--buckets goes with a sale without variants: with --variants give each variant's buckets in @FILE")
	}
	vs, err := parseVariants(spec)
	if err != nil {
		return err
	}
	req.Variants, req.Buckets = vs, 0
	return nil
}
