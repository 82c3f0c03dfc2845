// Stub (see ../README.md): the Metal subset bridge.m uses, with the SDK's signatures and values.
#pragma once
#import <Foundation/Foundation.h>
#include <dispatch/dispatch.h>

NS_ASSUME_NONNULL_BEGIN

typedef struct {
	NSUInteger width, height, depth;
} MTLSize;

static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
	MTLSize s = {width, height, depth};
	return s;
}

#define MTLResourceCPUCacheModeShift 0
#define MTLResourceStorageModeShift 4
#define MTLResourceHazardTrackingModeShift 8

typedef NS_OPTIONS(NSUInteger, MTLResourceOptions){
    MTLResourceCPUCacheModeDefaultCache = 0 << MTLResourceCPUCacheModeShift,
    MTLResourceCPUCacheModeWriteCombined = 1 << MTLResourceCPUCacheModeShift,
    MTLResourceStorageModeShared = 0 << MTLResourceStorageModeShift,
    MTLResourceStorageModeManaged = 1 << MTLResourceStorageModeShift,
    MTLResourceStorageModePrivate = 2 << MTLResourceStorageModeShift,
    MTLResourceStorageModeMemoryless = 3 << MTLResourceStorageModeShift,
    MTLResourceHazardTrackingModeDefault = 0 << MTLResourceHazardTrackingModeShift,
};

typedef NS_ENUM(NSInteger, MTLGPUFamily){
    MTLGPUFamilyApple7 = 1007,
    MTLGPUFamilyMac2 = 2002,
    MTLGPUFamilyMetal3 API_AVAILABLE(macos(13.0)) = 5001,
};

typedef NS_OPTIONS(NSUInteger, MTLCommandBufferErrorOption){
    MTLCommandBufferErrorOptionNone = 0,
    MTLCommandBufferErrorOptionEncoderExecutionStatus = 1 << 0,
} API_AVAILABLE(macos(11.0));

typedef NS_ENUM(NSInteger, MTLCommandEncoderErrorState){
    MTLCommandEncoderErrorStateUnknown = 0, MTLCommandEncoderErrorStateCompleted = 1,
    MTLCommandEncoderErrorStateAffected = 2, MTLCommandEncoderErrorStatePending = 3,
    MTLCommandEncoderErrorStateFaulted = 4,
} API_AVAILABLE(macos(11.0));

API_AVAILABLE(macos(11.0))
extern NSErrorUserInfoKey const MTLCommandBufferEncoderInfoErrorKey;

typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus){
    MTLCommandBufferStatusNotEnqueued = 0, MTLCommandBufferStatusEnqueued = 1,
    MTLCommandBufferStatusCommitted = 2,   MTLCommandBufferStatusScheduled = 3,
    MTLCommandBufferStatusCompleted = 4,   MTLCommandBufferStatusError = 5,
};

@protocol MTLDevice, MTLCommandQueue, MTLCommandBuffer, MTLLibrary, MTLFunction, MTLComputePipelineState,
    MTLBuffer, MTLComputeCommandEncoder, MTLBlitCommandEncoder;

typedef NS_ENUM(NSUInteger, MTLLanguageVersion){
    MTLLanguageVersion2_3 API_AVAILABLE(macos(11.0)) = (2 << 16) + 3,
    MTLLanguageVersion2_4 API_AVAILABLE(macos(12.0)) = (2 << 16) + 4,
    MTLLanguageVersion3_0 API_AVAILABLE(macos(13.0)) = (3 << 16) + 0,
};

@interface MTLCompileOptions : NSObject
@property(readwrite, nonatomic) MTLLanguageVersion languageVersion;
@end

@protocol MTLResource <NSObject>
@end

@protocol MTLBuffer <MTLResource>
@property(readonly) NSUInteger length;
- (void *)contents NS_RETURNS_INNER_POINTER;
@end

@protocol MTLFunction <NSObject>
@end

@protocol MTLLibrary <NSObject>
- (nullable id<MTLFunction>)newFunctionWithName:(NSString *)functionName;
@end

typedef void (^MTLNewLibraryCompletionHandler)(id<MTLLibrary> _Nullable library, NSError *_Nullable error);
typedef void (^MTLNewComputePipelineStateCompletionHandler)(id<MTLComputePipelineState> _Nullable computePipelineState,
                                                            NSError *_Nullable error);

@protocol MTLComputePipelineState <NSObject>
@property(readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@property(readonly) NSUInteger threadExecutionWidth;
@property(readonly) NSUInteger staticThreadgroupMemoryLength;
@end

@protocol MTLCommandEncoder <NSObject>
@property(nullable, copy, atomic) NSString *label;
- (void)endEncoding;
@end

@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
@end

@protocol MTLBlitCommandEncoder <MTLCommandEncoder>
- (void)copyFromBuffer:(id<MTLBuffer>)sourceBuffer
           sourceOffset:(NSUInteger)sourceOffset
               toBuffer:(id<MTLBuffer>)destinationBuffer
      destinationOffset:(NSUInteger)destinationOffset
                   size:(NSUInteger)size;
@end

API_AVAILABLE(macos(11.0))
@interface MTLCommandBufferDescriptor : NSObject
@property(readwrite, nonatomic) BOOL retainedReferences;
@property(readwrite, nonatomic) MTLCommandBufferErrorOption errorOptions;
@end

API_AVAILABLE(macos(11.0))
@protocol MTLCommandBufferEncoderInfo <NSObject>
@property(readonly, nonatomic) NSString *label;
@property(readonly, nonatomic) MTLCommandEncoderErrorState errorState;
@end

@protocol MTLCommandBuffer <NSObject>
@property(readonly) MTLCommandBufferStatus status;
@property(nullable, readonly) NSError *error;
@property(nullable, copy, atomic) NSString *label;
@property(readonly) CFTimeInterval GPUStartTime API_AVAILABLE(macos(10.15));
@property(readonly) CFTimeInterval GPUEndTime API_AVAILABLE(macos(10.15));
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoder;
- (nullable id<MTLBlitCommandEncoder>)blitCommandEncoder;
- (void)commit;
- (void)waitUntilCompleted;
@end

@protocol MTLCommandQueue <NSObject>
- (nullable id<MTLCommandBuffer>)commandBuffer;
- (nullable id<MTLCommandBuffer>)commandBufferWithDescriptor:(MTLCommandBufferDescriptor *)descriptor
    API_AVAILABLE(macos(11.0));
@end

@protocol MTLDevice <NSObject>
@property(nonnull, readonly) NSString *name;
@property(readonly) MTLSize maxThreadsPerThreadgroup;
@property(readonly) NSUInteger maxThreadgroupMemoryLength;
@property(readonly) uint64_t recommendedMaxWorkingSetSize;
@property(readonly) BOOL hasUnifiedMemory;
@property(readonly) NSUInteger maxBufferLength;
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily API_AVAILABLE(macos(10.15));
- (nullable id<MTLCommandQueue>)newCommandQueue;
- (nullable id<MTLLibrary>)newLibraryWithData:(dispatch_data_t)data error:(__autoreleasing NSError **)error;
- (nullable id<MTLLibrary>)newLibraryWithSource:(NSString *)source
                                        options:(nullable MTLCompileOptions *)options
                                          error:(__autoreleasing NSError **)error;
- (void)newLibraryWithSource:(NSString *)source
                     options:(nullable MTLCompileOptions *)options
           completionHandler:(MTLNewLibraryCompletionHandler)completionHandler;
- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                                                       error:(__autoreleasing NSError **)error;
- (void)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                          completionHandler:(MTLNewComputePipelineStateCompletionHandler)completionHandler;
- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
@end

extern id<MTLDevice> _Nullable MTLCreateSystemDefaultDevice(void) NS_RETURNS_RETAINED;

NS_ASSUME_NONNULL_END
