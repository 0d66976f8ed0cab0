// Package otelglobal holds tests that need a process of their own: they set
// OpenTelemetry's global providers after an engine was built, and no test
// may have set them before (package engine's own tests do, in some order).
// Every package's tests run in a process of its own.
package otelglobal
