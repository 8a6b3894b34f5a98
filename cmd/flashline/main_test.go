package main

import (
	"testing"

	"github.com/flashline/flashline/internal/testkit/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }
