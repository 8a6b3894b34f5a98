// Command flashline-loadtest holds the load generator's command.
//
// It is Flashline's load generator: it creates a
// sale on the service it is pointed at, drives a scenario (northline, storm, hot,
// overload, crowd, no, edge) against it and verifies that nothing was
// oversold. It is a command of its own so that the service binary links
// neither it, nor vegeta, nor the generated API client. See run.go.
package main
