package stark

// AppendPostcard appends postcard(MultiStarkVerifyingKey) as OpenVM stark-backend v2.0.1 writes
// it (keygen/types.rs): the postcard bytes of MultiStarkVerifyingKey0 (parameters included),
// then pre_hash, 8 BabyBear elements, each a varint of its Montgomery form (Plonky3 0.4.3
// serializes MontyField31 by its internal value). `metalprove vk export` writes these bytes;
// air.DecodeMultiVerifyingKey reads them.
func (vk *VerifyingKey) AppendPostcard(b []byte) []byte {
	return vk.MVK.AppendKeyPostcard(b, vk.PreHash)
}
