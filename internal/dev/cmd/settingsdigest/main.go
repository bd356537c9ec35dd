// Command settingsdigest writes the digest of one function's settings
// (package internal/dev/deploy/settings) into its Lambda artifact, so that
// a deploy that changes them publishes a new version of that function. The
// Makefile's build-<LogicalId> targets, which `sam build` runs, call it:
//
//	go run ./internal/dev/cmd/settingsdigest -function ApiFunction -o $(ARTIFACTS_DIR)/settings.sha256
//
// It reads template.yaml and samconfig.toml from the current folder (the
// project's, or SAM's copy of it), or from -template and -samconfig.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/jobboard/jobboard/internal/dev/deploy/settings"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "settingsdigest:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("settingsdigest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	function := fs.String("function", "", "the function's logical id in the template (required)")
	templatePath := fs.String("template", "template.yaml", "the SAM template")
	samconfigPath := fs.String("samconfig", "samconfig.toml", "the SAM CLI configuration")
	out := fs.String("o", "", "the file to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *function == "" || *out == "" || fs.NArg() > 0 {
		return errors.New("usage: settingsdigest -function LOGICAL_ID -o FILE [-template FILE] [-samconfig FILE]")
	}
	tpl, err := os.ReadFile(*templatePath)
	if err != nil {
		return err
	}
	config, err := os.ReadFile(*samconfigPath)
	if err != nil {
		return err
	}
	t, err := settings.ParseTemplate(tpl)
	if err != nil {
		return err
	}
	sets, err := settings.ParameterSets(t, config)
	if err != nil {
		return err
	}
	digest, err := settings.Digest(t, sets, *function)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, []byte(digest+"\n"), 0o644)
}
