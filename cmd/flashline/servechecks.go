package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/webhook"
)

// checkSecrets refuses secrets an attacker could guess: outside --demo, the
// admin token, the JWT secret, the payment webhook secret (when set) and
// every waiting-room key must be at least minSecretLen bytes, and the
// waiting-room keys must be set (derived from the JWT secret, whoever issues
// customer tokens could mint admission tokens). The payment secret must be a
// secret of its own: whoever knows it can confirm any hold.
func checkSecrets(cfg serveConfig, stderr io.Writer) error {
	if cfg.paymentSecret != "" && (cfg.paymentSecret == cfg.adminToken || cfg.paymentSecret == cfg.jwtSecret) {
		return errors.New("serve: FLASHLINE_PAYMENT_WEBHOOK_SECRET must be a secret of its own, not the admin token or the JWT secret")
	}
	for _, s := range append(webhook.SplitSecrets(cfg.stripeSecrets), webhook.SplitSecrets(cfg.adyenKeys)...) {
		if s == cfg.adminToken || s == cfg.jwtSecret || s == cfg.paymentSecret {
			return errors.New("serve: FLASHLINE_STRIPE_WEBHOOK_SECRET and FLASHLINE_ADYEN_HMAC_KEY must be secrets of their own, not the admin token, the JWT secret or the payment webhook secret")
		}
	}
	if cfg.stripeTolerance <= 0 {
		return errors.New("serve: --stripe-webhook-tolerance must be positive")
	}
	if cfg.demo {
		if len(cfg.adminToken) < minSecretLen || len(cfg.jwtSecret) < minSecretLen || cfg.waitroomKeys == "" || cfg.paymentSecret == "" {
			fmt.Fprintln(stderr, "flashline: --demo: development secrets in use (short, or waiting-room keys and the payment webhook secret derived from the JWT secret); never in production")
		}
		return nil
	}
	secrets := []struct{ name, value string }{
		{"FLASHLINE_ADMIN_TOKEN", cfg.adminToken},
	}
	if cfg.jwtSecret != "" {
		secrets = append(secrets, struct{ name, value string }{"FLASHLINE_JWT_SECRET", cfg.jwtSecret})
	}
	if cfg.paymentSecret != "" {
		secrets = append(secrets, struct{ name, value string }{"FLASHLINE_PAYMENT_WEBHOOK_SECRET", cfg.paymentSecret})
	}
	for _, s := range webhook.SplitSecrets(cfg.stripeSecrets) {
		secrets = append(secrets, struct{ name, value string }{"FLASHLINE_STRIPE_WEBHOOK_SECRET", s})
	}
	for _, s := range secrets {
		if len(s.value) < minSecretLen {
			return fmt.Errorf("serve: %s is %d bytes; it must be at least %d random bytes (only --demo allows development values)", s.name, len(s.value), minSecretLen)
		}
	}
	if cfg.waitroomKeys == "" {
		return errors.New("serve: FLASHLINE_WAITROOM_KEYS must be set (\"kid:secret\", a secret of 32+ random bytes, the same on every instance); only --demo derives them from the JWT secret")
	}
	return nil
}

// checkClients checks the bounds on what clients hold (connections, one
// customer's requests in flight, status streams) and fills in the streams'
// default: half the connections, since each stream holds one.
func checkClients(cfg *serveConfig) error {
	if cfg.customerInFlight < 0 || cfg.maxConns < 1 || cfg.maxStreams < 0 || cfg.maxConnsPerAddr < 0 {
		return errors.New("serve: --customer-in-flight, --max-streams and --max-conns-per-addr must be at least 0 and --max-conns at least 1")
	}
	var err error
	if cfg.trustedProxies, err = parseTrustedProxies(cfg.trustedProxiesFlag); err != nil {
		return err
	}
	if cfg.maxStreams == 0 {
		cfg.maxStreams = max(1, cfg.maxConns/2)
	}
	return nil
}

// defaultTrustedProxies is --trusted-proxies' default: the loopback
// addresses a proxy on the same machine (nginx, a sidecar) connects from,
// which no other machine can send from. 127.0.0.2 and the rest of
// 127.0.0.0/8 are not in it.
const defaultTrustedProxies = "127.0.0.1,::1"

// parseTrustedProxies reads --trusted-proxies: addresses or CIDR prefixes,
// comma-separated, or "none".
func parseTrustedProxies(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "none" {
		return nil, nil
	}
	var prefixes []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			addr, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return nil, fmt.Errorf("serve: --trusted-proxies: %q is neither an IP address nor a CIDR prefix", part)
			}
			p = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		prefixes = append(prefixes, p.Masked())
	}
	return prefixes, nil
}

// checkBeacon reads the lottery's beacon: all of --beacon-url,
// --beacon-public-key, --beacon-genesis and --beacon-period, or none.
func checkBeacon(cfg *serveConfig) error {
	if cfg.jobs.BeaconURL == "" && cfg.beaconKey == "" && cfg.beaconGenesis == 0 && cfg.beaconPeriod == 0 {
		return nil
	}
	u, err := url.Parse(cfg.jobs.BeaconURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("serve: --beacon-url must be an http(s) URL (with --beacon-public-key, --beacon-genesis and --beacon-period)")
	}
	key, err := hex.DecodeString(cfg.beaconKey)
	if err != nil {
		return errors.New("serve: --beacon-public-key must be hex")
	}
	chain := flashline.BeaconChain{PublicKey: key, Genesis: time.Unix(int64(cfg.beaconGenesis), 0), Period: cfg.beaconPeriod}
	if cfg.beaconGenesis <= 0 {
		return errors.New("serve: --beacon-genesis must be the chain's genesis time in Unix seconds")
	}
	if err := chain.Validate(); err != nil {
		return fmt.Errorf("serve: the beacon: %w", err)
	}
	cfg.beacon = &chain
	return nil
}

// checkNotify checks the lottery's notification webhook: an http(s) URL
// with a secret of its own (32+ bytes outside --demo).
func checkNotify(cfg serveConfig) error {
	if cfg.jobs.NotifyURL == "" {
		return nil
	}
	u, err := url.Parse(cfg.jobs.NotifyURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("serve: FLASHLINE_NOTIFY_URL must be an http(s) URL")
	}
	switch secret := cfg.jobs.NotifySecret; {
	case secret == "":
		return errors.New("serve: FLASHLINE_NOTIFY_URL needs FLASHLINE_NOTIFY_SECRET, the secret its notifications are signed with")
	case secret == cfg.adminToken || secret == cfg.jwtSecret || secret == cfg.paymentSecret:
		return errors.New("serve: FLASHLINE_NOTIFY_SECRET must be a secret of its own")
	case !cfg.demo && len(secret) < minSecretLen:
		return fmt.Errorf("serve: FLASHLINE_NOTIFY_SECRET is %d bytes; it must be at least %d random bytes", len(secret), minSecretLen)
	}
	return nil
}
