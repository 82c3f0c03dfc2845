// Stub (see ../README.md): the Foundation / Objective-C runtime subset bridge.m uses.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define NS_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#define NS_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")
#define NS_ENUM(_type, _name) enum _name : _type _name; enum _name : _type
#define NS_OPTIONS(_type, _name) enum _name : _type _name; enum _name : _type
#define NS_RETURNS_RETAINED __attribute__((ns_returns_retained))
#define NS_RETURNS_INNER_POINTER __attribute__((objc_returns_inner_pointer))
#define NS_FORMAT_FUNCTION(F, A) __attribute__((format(__NSString__, F, A)))
#define NS_INLINE static __inline__ __attribute__((always_inline))
#define CF_CONSUMED __attribute__((cf_consumed))
#define CF_RETURNS_RETAINED __attribute__((cf_returns_retained))
// <os/availability.h>, in the one form the stubs use: API_AVAILABLE(macos(V)).
#define __MP_STUB_AVAILABLE_macos(v) __attribute__((availability(macos, introduced = v)))
#define API_AVAILABLE(platform) __MP_STUB_AVAILABLE_##platform

// <objc/objc.h> on arm64.
typedef _Bool BOOL;
#define YES __objc_yes
#define NO __objc_no
#define nil ((void *)0) // __DARWIN_NULL

typedef long NSInteger;
typedef unsigned long NSUInteger;
typedef const void *CFTypeRef;
typedef double CFTimeInterval; // <CoreFoundation/CFDate.h>
typedef double NSTimeInterval; // <Foundation/NSDate.h>

NS_ASSUME_NONNULL_BEGIN

@class NSString;

@protocol NSObject
- (BOOL)isEqual:(id)object;
- (BOOL)isKindOfClass:(Class)aClass;
@end

__attribute__((objc_root_class))
@interface NSObject <NSObject> {
	Class isa;
}
+ (instancetype)alloc;
+ (instancetype)new;
+ (Class)class;
- (instancetype)init;
@end

@interface NSArray<__covariant ObjectType> : NSObject
@property(readonly) NSUInteger count;
- (ObjectType)objectAtIndexedSubscript:(NSUInteger)idx;
@end

@interface NSMutableArray<ObjectType> : NSArray<ObjectType>
+ (instancetype)array;
- (void)addObject:(ObjectType)anObject;
- (void)removeAllObjects;
- (void)setObject:(ObjectType)obj atIndexedSubscript:(NSUInteger)idx;
@end

@interface NSNull : NSObject
+ (NSNull *)null;
@end

@interface NSDictionary<__covariant KeyType, __covariant ObjectType> : NSObject
- (nullable ObjectType)objectForKeyedSubscript:(KeyType)key;
@end

@interface NSString : NSObject
+ (nullable instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;
+ (instancetype)stringWithFormat:(NSString *)format, ... NS_FORMAT_FUNCTION(1, 2);
@property(nullable, readonly) const char *UTF8String NS_RETURNS_INNER_POINTER;
@end

typedef NSString *NSErrorUserInfoKey;

@interface NSProcessInfo : NSObject
@property(class, readonly, strong) NSProcessInfo *processInfo;
@property(readonly) NSTimeInterval systemUptime;
@end

@interface NSError : NSObject
@property(readonly, copy) NSString *domain;
@property(readonly) NSInteger code;
@property(readonly, copy) NSString *localizedDescription;
@property(readonly, copy) NSDictionary<NSErrorUserInfoKey, id> *userInfo;
@end

// <Foundation/NSObject.h>
NS_INLINE CF_RETURNS_RETAINED CFTypeRef _Nullable CFBridgingRetain(id _Nullable X) {
	return (__bridge_retained CFTypeRef)X;
}
NS_INLINE id _Nullable CFBridgingRelease(CFTypeRef CF_CONSUMED _Nullable X) {
	return (__bridge_transfer id)X;
}

NS_ASSUME_NONNULL_END
