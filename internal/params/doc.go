// Package params owns the SWIRL system parameters (spec protocol-a §4): the SystemParams
// structure and its derived values, the WHIR round builder (§4.2), the production and test
// presets (§4.3/§4.4), the soundness calculator (§4.6), structural validation, the postcard
// serialization used by the verifying-key pre-hash (§3.6) and the strict YAML form of the
// `params` section of a config file.
//
// All floating-point work reproduces OpenVM stark-backend v2.0.1 in IEEE-754 binary64. Products
// that feed an addition are wrapped in explicit float64 conversions so that the Go compiler never
// fuses them into FMA instructions (it may on arm64), which would change last-ulp results.
package params
