package main

import (
	"fmt"
	"go/format"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"github.com/metalprove/metalprove/internal/field"
)

// Typed dispatch functions (internal/kernels/dispatch.gen.go): for every kernel a function
// whose parameters are the kernel's [[buffer]] slots in order (*gpu.Buffer for a pointer slot,
// uint32 for `constant uint&`, a generated Go struct for `constant Struct&`) and one byte length
// per [[threadgroup]] array, so that a launcher passing the wrong arguments fails to compile
// instead of failing at run time.

// goKeywords are renamed with a trailing underscore when a kernel parameter or field uses one.
var goKeywords = map[string]bool{
	"break": true, "case": true, "chan": true, "const": true, "continue": true, "default": true,
	"defer": true, "else": true, "fallthrough": true, "for": true, "func": true, "go": true,
	"goto": true, "if": true, "import": true, "interface": true, "map": true, "package": true,
	"range": true, "return": true, "select": true, "struct": true, "switch": true, "type": true,
	"var": true,
}

// camel turns snake_case into lowerCamelCase (upper: UpperCamelCase).
func camel(s string, upper bool) string {
	var b strings.Builder
	up := upper
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			b.WriteRune(unicode.ToUpper(r))
			up = false
		} else {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if !upper && out != "" {
		out = string(unicode.ToLower(rune(out[0]))) + out[1:]
	}
	return out
}

func goIdent(s string) string {
	id := camel(s, false)
	if goKeywords[id] {
		id += "_"
	}
	return id
}

// structField is one uint field (n = array length, 1 for a scalar).
type structField struct {
	name string
	n    int
}

// fields lists the uint fields of a value struct (valueSize has validated the body).
func (s structs) fields(t string) []structField {
	var out []structField
	for _, f := range strings.Split(s[t], ";") {
		f = strings.Join(strings.Fields(f), " ")
		sm := reField.FindStringSubmatch(f)
		if sm == nil {
			continue
		}
		for _, d := range strings.Split(sm[1], ",") {
			dm := reDecl.FindStringSubmatch(strings.TrimSpace(d))
			if dm == nil {
				continue
			}
			n := 1
			if dm[2] != "" {
				n, _ = strconv.Atoi(dm[2])
			}
			out = append(out, structField{name: dm[1], n: n})
		}
	}
	return out
}

// valueType is the Go type of a `constant T&` slot: uint32 or the struct's generated name.
func valueType(p Param) string {
	t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(p.Pointee(), "constant")), "const"))
	if t == "uint" {
		return "uint32"
	}
	return camel(t, false)
}

func genLaunchers(ks []Kernel, st structs) string {
	var b strings.Builder
	b.WriteString(banner)
	b.WriteString("\npackage kernels\n\nimport \"github.com/metalprove/metalprove/internal/gpu\"\n")

	// Value structs used by some kernel, in first-use order.
	var used []string
	seen := map[string]bool{}
	for _, k := range ks {
		for _, p := range k.Params {
			if p.Attr != "buffer" || !p.IsRef() {
				continue
			}
			if t := valueType(p); t != "uint32" && !seen[t] {
				seen[t] = true
				used = append(used, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(p.Pointee(), "constant")), "const")))
			}
		}
	}
	for _, t := range used {
		gt := camel(t, false)
		fs := st.fields(t)
		fmt.Fprintf(&b, "\n// %s is the value struct %s of the shaders: uint fields in declaration order.\ntype %s struct {\n", gt, t, gt)
		for _, f := range fs {
			if f.n == 1 {
				fmt.Fprintf(&b, "\t%s uint32\n", goIdent(f.name))
			} else {
				fmt.Fprintf(&b, "\t%s [%d]uint32\n", goIdent(f.name), f.n)
			}
		}
		b.WriteString("}\n\n")
		fmt.Fprintf(&b, "func (v %s) arg() gpu.Arg {\n\treturn gpu.U32(", gt)
		var parts []string
		for _, f := range fs {
			if f.n == 1 {
				parts = append(parts, "v."+goIdent(f.name))
				continue
			}
			for i := range f.n {
				parts = append(parts, fmt.Sprintf("v.%s[%d]", goIdent(f.name), i))
			}
		}
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString(")\n}\n")
	}

	for _, k := range ks {
		fixed := map[string]bool{"enc": true, "groups": true, "tpg": true, "mod": true}
		name := func(p string) string {
			id := goIdent(p)
			for fixed[id] {
				id += "_"
			}
			fixed[id] = true
			return id
		}
		var params, args, tg []string
		bufs := make([]Param, k.NBuf)
		tgs := make([]Param, k.NTG)
		for _, p := range k.Params {
			switch p.Attr {
			case "buffer":
				bufs[p.Index] = p
			case "threadgroup":
				tgs[p.Index] = p
			}
		}
		for _, p := range bufs {
			id := name(p.Name)
			switch {
			case !p.IsRef():
				params = append(params, id+" *gpu.Buffer")
				args = append(args, "gpu.Buf("+id+")")
			case valueType(p) == "uint32":
				params = append(params, id+" uint32")
				args = append(args, "gpu.U32("+id+")")
			default:
				params = append(params, id+" "+valueType(p))
				args = append(args, id+".arg()")
			}
		}
		for _, p := range tgs {
			id := name(p.Name + "_bytes")
			params = append(params, id+" uint32")
			tg = append(tg, id)
		}
		fn := "dispatch" + camel(k.Name, true)
		fmt.Fprintf(&b, "\n// %s encodes kernel %s (%s).\n", fn, k.Name, k.Pos)
		if k.Module != "" {
			// A kernel of a run-time module template: dispatched from one built module
			// (gpu.Device.BuildModules) of that template.
			fmt.Fprintf(&b, "// It is a kernel of module template %q: mod is a module built from it.\n", k.Module)
			fmt.Fprintf(&b, "func %s(enc *gpu.Batch, mod *gpu.Module, groups, tpg gpu.Dim3, %s) *gpu.Batch {\n", fn, strings.Join(params, ", "))
		} else {
			fmt.Fprintf(&b, "func %s(enc *gpu.Batch, groups, tpg gpu.Dim3, %s) *gpu.Batch {\n", fn, strings.Join(params, ", "))
		}
		call := fmt.Sprintf("enc.Dispatch(%q, groups, tpg, []gpu.Arg{%s}", k.Name, strings.Join(args, ", "))
		if k.Module != "" {
			call = fmt.Sprintf("enc.DispatchIn(mod, %q, groups, tpg, []gpu.Arg{%s}", k.Name, strings.Join(args, ", "))
		}
		if len(tg) > 0 {
			call += ", " + strings.Join(tg, ", ")
		}
		fmt.Fprintf(&b, "\treturn %s)\n}\n", call)
	}
	src, err := format.Source([]byte(b.String()))
	check(err)
	return string(src)
}

// genFieldHeader writes the BabyBear and Fp4 constants of the shader headers from
// internal/field, so that the Go field and the kernels cannot disagree.
func genFieldHeader() string {
	p := new(big.Int).SetUint64(uint64(field.P))
	two32 := new(big.Int).Lsh(big.NewInt(1), 32)
	pinv := new(big.Int).ModInverse(p, two32)
	one := new(big.Int).Mod(two32, p)
	r2 := new(big.Int).Mod(new(big.Int).Mul(two32, two32), p)
	w := new(big.Int).SetUint64(uint64(field.W))
	wMont := new(big.Int).Mod(new(big.Int).Mul(w, two32), p)
	hex := func(x *big.Int) string { return fmt.Sprintf("0x%08xu", x.Uint64()) }
	var b strings.Builder
	b.WriteString(banner)
	b.WriteString(`// field_consts.h - the BabyBear and Fp4 constants of babybear.h and bb4.h, from internal/field
// (field.P, field.W) by scripts/mslgen: Montgomery form uses R = 2^32.
#ifndef FIELD_CONSTS_H
#define FIELD_CONSTS_H

`)
	fmt.Fprintf(&b, "#define BB_P %s     // modulus p = 2^31 - 2^27 + 1\n", hex(p))
	fmt.Fprintf(&b, "#define BB_PINV %s  // p^-1 mod 2^32\n", hex(pinv))
	fmt.Fprintf(&b, "#define BB_ONE %s   // 1 in Montgomery form: 2^32 mod p\n", hex(one))
	fmt.Fprintf(&b, "#define BB_R2 %s    // 2^64 mod p: bb_mul(x, BB_R2) converts x into Montgomery form\n", hex(r2))
	fmt.Fprintf(&b, "#define BB4_W %du            // Fp4 = Fp[X]/(X^4 - W)\n", w.Uint64())
	fmt.Fprintf(&b, "#define BB4_W_MONT %s  // W in Montgomery form\n", hex(wMont))
	b.WriteString("\n#endif\n")
	return b.String()
}
