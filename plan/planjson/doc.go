// Package planjson is the JSON of a plan, defined once: the document
// `rmqtopo plan --format json` writes (Document, docs/plan-json.md), and
// the file `rmqtopo plan --out` writes and `rmqtopo apply FILE` and
// `rmqtopo show` read (File, docs/plan-apply.md): a plan, the diagnostics
// it was shown with, and the fingerprint of the state it was made from,
// so that apply refuses a plan whose broker changed since. Both share one
// Change and one FormatVersion. The plan package's types are plain data;
// this package alone says how a plan looks as JSON, and the text and
// Markdown plans are drawn from the same Document (Terraform's
// plans/jsonplan split).
package planjson
